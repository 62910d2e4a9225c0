import { describe, expect, it } from 'vitest';
import type { CliMessage } from '../../../src/index.ts';
import {
  assistantText,
  CLEAN_EXIT,
  expectedAssistantText,
  expectedThinking,
  mapLines,
  readTranscript,
  recordedExit,
  thoughtText,
  transcriptNames,
  withoutDeltas,
  withoutSnapshots,
} from './transcripts.ts';
import { expectContract, expectOneResultPerToolCall, failure, terminalOf } from '../contract.ts';

function mapRecorded(name: string): CliMessage[] {
  return mapLines(readTranscript(name), recordedExit(name));
}

describe('every recorded pi transcript', () => {
  const names = transcriptNames();

  it('is present (the recordings exist)', () => {
    expect(names.length).toBeGreaterThanOrEqual(10);
  });

  it.each(names)('%s: every message matches the contract schema and there is exactly one terminal, last', (name) => {
    expectContract(mapRecorded(name));
  });

  it.each(names)('%s: the assistant deltas add up to exactly the text pi ended with (snapshots and deltas)', (name) => {
    const lines = readTranscript(name);
    const expected = expectedAssistantText(lines);
    expect(assistantText(mapLines(lines, recordedExit(name)))).toBe(expected);
    expect(assistantText(mapLines(withoutSnapshots(lines), recordedExit(name)))).toBe(expected);
    expect(assistantText(mapLines(withoutDeltas(lines), recordedExit(name)))).toBe(expected);
  });

  it.each(names)('%s: all thinking is released once, in order', (name) => {
    const lines = readTranscript(name);
    expect(thoughtText(mapLines(lines, recordedExit(name)))).toBe(expectedThinking(lines));
  });

  it.each(names)('%s: one tool.call and exactly one result per toolCallId, the call first', (name) => {
    const messages = mapRecorded(name);
    expectOneResultPerToolCall(messages);
  });
});

describe('session events', () => {
  it("a new session is session.started with pi's id", () => {
    const messages = mapRecorded('text');
    const id = (JSON.parse(readTranscript('text')[0]!) as { id: string }).id;
    expect(messages[0]).toEqual({ type: 'session.started', content: { sessionId: id } });
  });

  it('the session the caller asked to resume is session.resumed', () => {
    const lines = readTranscript('session-resume');
    const id = (JSON.parse(lines[0]!) as { id: string }).id;
    const messages = mapLines(lines, CLEAN_EXIT, { resumeSessionId: id });
    expect(messages[0]).toEqual({ type: 'session.resumed', content: { sessionId: id } });
    expect(mapLines(lines, CLEAN_EXIT, { resumeSessionId: 'someother-id' })[0]?.type).toBe('session.started');
  });
});

describe('assistant text and thinking', () => {
  it('a text answer streams as deltas that add up to the answer', () => {
    const messages = mapRecorded('text');
    expect(messages.filter((m) => m.type === 'assistant').length).toBeGreaterThan(1);
    expect(assistantText(messages)).toBe(expectedAssistantText(readTranscript('text')));
    expect(terminalOf(messages)).toMatchObject({ type: 'terminal.completed', content: { stopReason: 'stop' } });
  });

  it('thinking is held back until the message ends, then released as assistant.thought', () => {
    const messages = mapRecorded('thinking');
    const thoughtAt = messages.findIndex((m) => m.type === 'assistant.thought');
    const lastTextAt = messages.findLastIndex((m) => m.type === 'assistant');
    expect(thoughtAt).toBeGreaterThan(lastTextAt);
    expect(thoughtText(messages)).toBe(expectedThinking(readTranscript('thinking')));
  });

  it('thinking during a tool turn is released when the run reaches a non-toolUse stop, in order', () => {
    const lines = [
      ev({ type: 'session', id: 's1' }),
      ...assistantMessage(
        [
          { type: 'thinking', thinking: 'first I plan. ' },
          { type: 'toolCall', id: 't1', name: 'bash', arguments: { command: 'ls' } },
        ],
        'toolUse',
      ),
      ev({ type: 'tool_execution_end', toolCallId: 't1', toolName: 'bash', result: { content: [] }, isError: false }),
      ev({ type: 'turn_end', message: { role: 'assistant', stopReason: 'toolUse', content: [] }, toolResults: [] }),
      ...assistantMessage(
        [
          { type: 'thinking', thinking: 'then I answer.' },
          { type: 'text', text: 'Done.' },
        ],
        'stop',
      ),
      ev({ type: 'agent_end', messages: [] }),
    ];
    const messages = mapLines(lines);
    const thoughts = messages.filter((m) => m.type === 'assistant.thought');
    expect(thoughts.map((t) => t.content.text)).toEqual(['first I plan. ', 'then I answer.']);
    const firstThought = messages.indexOf(thoughts[0]!);
    expect(messages.findIndex((m) => m.type === 'tool.completed')).toBeLessThan(firstThought);
  });

  it('a message that replays the earlier text after a tool turn adds only its new text', () => {
    const lines = [
      ev({ type: 'session', id: 's1' }),
      ...assistantMessage(
        [
          { type: 'text', text: 'Let me check.' },
          { type: 'toolCall', id: 't1', name: 'bash', arguments: {} },
        ],
        'toolUse',
      ),
      ev({ type: 'tool_execution_end', toolCallId: 't1', toolName: 'bash', result: { content: [] }, isError: false }),
      ...assistantMessage([{ type: 'text', text: 'Let me check. It is fine.' }], 'stop'),
      ev({ type: 'agent_end', messages: [] }),
    ];
    expect(assistantText(mapLines(lines))).toBe('Let me check. It is fine.');
    expect(assistantText(mapLines(withoutSnapshots(lines)))).toBe('Let me check. It is fine.');
  });

  it('a message after a tool turn that only starts like the earlier one is not mistaken for a replay', () => {
    const lines = [
      ev({ type: 'session', id: 's1' }),
      ...assistantMessage(
        [
          { type: 'text', text: 'Let me check.' },
          { type: 'toolCall', id: 't1', name: 'bash', arguments: {} },
        ],
        'toolUse',
      ),
      ev({ type: 'tool_execution_end', toolCallId: 't1', toolName: 'bash', result: { content: [] }, isError: false }),
      ...assistantMessage([{ type: 'text', text: 'Let me say: all good.' }], 'stop'),
      ev({ type: 'agent_end', messages: [] }),
    ];
    expect(assistantText(mapLines(lines))).toBe('Let me check.Let me say: all good.');
  });
  it('a short message after a tool turn that merely begins like the earlier one is new text, not a replay', () => {
    const lines = [
      ev({ type: 'session', id: 's1' }),
      ...assistantMessage(
        [
          { type: 'text', text: 'Done!' },
          { type: 'toolCall', id: 't1', name: 'bash', arguments: {} },
        ],
        'toolUse',
      ),
      ev({ type: 'tool_execution_end', toolCallId: 't1', toolName: 'bash', result: { content: [] }, isError: false }),
      ...assistantMessage([{ type: 'text', text: 'Do' }], 'stop'),
      ev({ type: 'agent_end', messages: [] }),
    ];
    expect(assistantText(mapLines(lines))).toBe('Done!Do');
  });
});

describe('tools', () => {
  it('a tool turn gives tool.call, argument updates, and one tool.completed though pi reports the result three times', () => {
    const messages = mapRecorded('tool');
    const types = messages.map((m) => m.type);
    expect(types.filter((t) => t === 'tool.call')).toHaveLength(1);
    expect(types.filter((t) => t === 'tool.completed')).toHaveLength(1);
    expect(types).toContain('tool.update');
    const call = messages.find((m) => m.type === 'tool.call');
    expect(call?.content).toMatchObject({ name: 'bash' });
    const last = messages.filter((m) => m.type === 'tool.update' && !('partialResult' in m.content)).at(-1);
    expect(last?.content).toMatchObject({ arguments: { command: expect.any(String) } });
  });

  it('a failing tool gives tool.failed', () => {
    const messages = mapRecorded('tool-fail');
    expect(messages.filter((m) => m.type === 'tool.failed')).toHaveLength(1);
    expect(messages.filter((m) => m.type === 'tool.completed')).toHaveLength(0);
  });

  it('two tool calls in one message each get their call and their result', () => {
    const messages = mapRecorded('two-tools');
    const ids = new Set(
      messages.filter((m) => m.type === 'tool.call').map((m) => (m.content as { toolCallId: string }).toolCallId),
    );
    expect(ids.size).toBe(2);
    expect(messages.filter((m) => m.type === 'tool.completed' || m.type === 'tool.failed')).toHaveLength(2);
  });

  it('a tool still running when the run ends gets one tool.failed before the terminal', () => {
    const lines = [
      ev({ type: 'session', id: 's1' }),
      ev({ type: 'tool_execution_start', toolCallId: 't9', toolName: 'bash', args: { command: 'sleep 100' } }),
    ];
    const messages = mapLines(lines, { exitCode: null, signal: 'SIGKILL', stopReason: null, stderrTail: '' });
    expect(messages.map((m) => m.type)).toEqual(['session.started', 'tool.call', 'tool.failed', 'terminal.failed']);
  });
});

describe('terminal failures and their category', () => {
  it.each([
    ['http401', 'auth'],
    ['http429', 'rate_limited'],
    ['http500', 'server_error'],
    ['http503', 'server_error'],
    ['midclose', 'network'],
  ] as const)("%s (exit 0) is terminal.failed with category %s and pi's own error text", (name, category) => {
    const content = failure(mapRecorded(name));
    expect(content.category).toBe(category);
    expect(content.agentError).toBeTruthy();
    expect(content.text).toContain(content.agentError);
  });

  it('a mid-stream close keeps the partial text that was already streamed', () => {
    const messages = mapRecorded('midclose');
    expect(assistantText(messages).length).toBeGreaterThan(0);
  });

  it("a Retry-After in pi's error text becomes retryAfterMs", () => {
    const lines = [
      ev({ type: 'session', id: 's1' }),
      ...assistantMessage([], 'error', '429 rate limited, please retry after 7 seconds'),
      ev({ type: 'agent_end', messages: [] }),
    ];
    expect(failure(mapLines(lines))).toMatchObject({ category: 'rate_limited', retryAfterMs: 7000 });
  });

  it('a stream that stops without its closing events is a failure even with exit code 0', () => {
    const lines = readTranscript('text');
    const cut = lines.slice(0, Math.floor(lines.length / 2));
    expect(failure(mapLines(cut))).toMatchObject({ category: 'process_crash' });
    expect(assistantText(mapLines(cut)).length).toBeGreaterThan(0);
  });

  it('a death by signal is process_crash with the signal', () => {
    const content = failure(mapRecorded('hang-midstream-sigterm'));
    expect(content.category).toBe('process_crash');
  });

  it('a non-zero exit before the end is process_crash with the exit code and the stderr tail', () => {
    const content = failure(
      mapLines(readTranscript('text').slice(0, 3), {
        exitCode: 3,
        signal: null,
        stopReason: null,
        stderrTail: 'boom: out of memory\n',
      }),
    );
    expect(content).toMatchObject({ category: 'process_crash', exitCode: 3, stderr: 'boom: out of memory\n' });
    expect(content.text).toContain('boom: out of memory');
  });

  it('an idle timeout is category timeout; a failure to spawn is category startup', () => {
    expect(
      failure(mapLines([], { exitCode: null, signal: 'SIGKILL', stopReason: 'idle_timeout', stderrTail: '' })).category,
    ).toBe('timeout');
    expect(
      failure(
        mapLines([], { exitCode: null, signal: null, stopReason: null, stderrTail: '', spawnError: 'spawn pi ENOENT' }),
      ).category,
    ).toBe('startup');
  });

  it('no usable events at all is invalid_output, listing the bad lines', () => {
    const content = failure(mapLines(['Segmentation fault', '{"no":"type"}', '{"type":"sess'], CLEAN_EXIT));
    expect(content.category).toBe('invalid_output');
    expect(content.invalid_output_lines).toHaveLength(3);
    expect(content.invalid_output_lines[0]).toContain('line 1');
    expect(content.invalid_output_lines[0]).toContain('Segmentation fault');
  });

  it("pi's own retries are surfaced as agent.retry, and the final error still decides", () => {
    const messages = mapRecorded('auto-retry-fail');
    expect(messages.filter((m) => m.type === 'agent.retry').length).toBeGreaterThanOrEqual(2);
    expect(terminalOf(messages).type).toBe('terminal.failed');
  });

  it('a retry event whose numbers do not fit (1e999 parses as Infinity) keeps the message and drops those fields', () => {
    const line =
      '{"type":"auto_retry_start","attempt":1e999,"maxAttempts":3,"delayMs":-1e999,"errorMessage":"overloaded"}';
    const lines = readTranscript('text');
    const retry = mapLines([...lines.slice(0, 2), line, ...lines.slice(2)]).find((m) => m.type === 'agent.retry');
    expect(retry?.content).toEqual({ phase: 'start', maxAttempts: 3, errorText: 'overloaded' });
  });
});

describe('bad lines', () => {
  it('garbage lines never break the stream: text unchanged, lines reported in the terminal message', () => {
    const lines = readTranscript('text');
    const noisy = [
      ...lines.slice(0, 4),
      'not json at all',
      '{"type":',
      '[1,2,3]',
      '{"noType":true}',
      ...lines.slice(4),
    ];
    const messages = mapLines(noisy);
    expect(assistantText(messages)).toBe(expectedAssistantText(lines));
    const terminal = terminalOf(messages);
    expect(terminal.type).toBe('terminal.completed');
    expect(terminal.content).toMatchObject({
      invalid_output_lines: expect.arrayContaining([expect.stringContaining('not json at all')]),
    });
    expect((terminal.content as { invalid_output_lines: string[] }).invalid_output_lines).toHaveLength(4);
  });
});

function ev(value: Record<string, unknown>): string {
  return JSON.stringify(value);
}

type Block = Record<string, unknown>;

/** A streamed assistant message: start, one cumulative update per block, end. */
function assistantMessage(blocks: Block[], stopReason: string, errorMessage?: string): string[] {
  const message = (content: Block[]) => ({
    role: 'assistant',
    content,
    stopReason,
    ...(errorMessage ? { errorMessage } : {}),
  });
  const lines = [ev({ type: 'message_start', message: message([]) })];
  blocks.forEach((block, i) => {
    const partial = message(blocks.slice(0, i + 1));
    const kind = block.type === 'text' ? 'text_delta' : block.type === 'thinking' ? 'thinking_delta' : 'toolcall_end';
    const delta = block.type === 'text' ? block.text : block.type === 'thinking' ? block.thinking : undefined;
    lines.push(
      ev({
        type: 'message_update',
        assistantMessageEvent: { type: kind, contentIndex: i, ...(delta === undefined ? {} : { delta }), partial },
        message: partial,
      }),
    );
  });
  lines.push(ev({ type: 'message_end', message: message(blocks) }));
  return lines;
}
