import type { ChatCompletionRequestBody, ScriptFn, ScriptStep } from './fake-model-server.ts';

/**
 * A fake model for workspace tests: a user message `RUN: <command>` is answered with pi's bash tool
 * running that command; once the last message is a tool result (or the user says anything else),
 * the answer is text. `RUN1:` / `RUN2:` pairs (`RUN1: a RUN2: b`) run `a` the first time the prompt
 * is seen and `b` every later time (a retry, a resumed turn). `RUN: a THEN: b` runs `a`, then
 * (after its result) `b`. sessiond's continuation prompt (a retry that continues the turn) is
 * answered with `onContinue` when given.
 */
export function runModel(onContinue?: string): ScriptFn {
  const seen = new Map<string, number>();
  return ({ body }): ScriptStep => {
    const messages = body.messages ?? [];
    const last = messages.at(-1);
    const lastUser = messages.findLastIndex((m) => m.role === 'user');
    const userText = lastUser === -1 ? '' : textOf(messages[lastUser]?.content);
    const then = /THEN: (.*)$/s.exec(userText);
    const results = messages.slice(lastUser + 1).filter((m) => m.role === 'tool').length;
    // The second step comes after a model's think time (sessiond records the first tool meanwhile).
    if (last?.role === 'tool' && then !== null && results === 1)
      return { ...bash(then[1] ?? '', body), headersDelayMs: 1000 };
    if (last === undefined || last.role !== 'user') return { text: 'Done.', chunkDelayMs: 0 };
    const text = textOf(last.content).replace(/ THEN: .*$/s, '');
    if (onContinue !== undefined && text.includes('Please carry on')) return bash(onContinue, body);
    const pair = /RUN1: (.*) RUN2: (.*)$/s.exec(text);
    if (pair !== null) {
      const count = seen.get(text) ?? 0;
      seen.set(text, count + 1);
      return bash(count === 0 ? (pair[1] ?? '') : (pair[2] ?? ''), body);
    }
    const run = /RUN: (.*)$/s.exec(text);
    if (run === null) return { text: 'Done.', chunkDelayMs: 0 };
    return bash(run[1] ?? '', body);
  };
}

function bash(command: string, body: ChatCompletionRequestBody): ScriptStep {
  // A fresh id per request: the conversation may hold earlier turns' calls.
  const id = `call_ws_${(body.messages ?? []).length}`;
  return { toolCalls: [{ id, name: 'bash', arguments: { command } }], chunkDelayMs: 0 };
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content))
    return content
      .map((part) => (typeof (part as { text?: unknown }).text === 'string' ? (part as { text: string }).text : ''))
      .join('');
  return '';
}
