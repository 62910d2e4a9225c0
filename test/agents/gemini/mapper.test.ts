import { describe, expect, it } from 'vitest';
import { GeminiMapper } from '../../../src/agents/gemini/mapper.ts';
import type { CliMessage } from '../../../src/index.ts';
import {
  assistantText,
  CLEAN_EXIT,
  expectedAssistantText,
  mapLines,
  mapRecorded,
  readTranscript,
  recordedExit,
  transcriptNames,
} from './transcripts.ts';
import { failure, terminalOf } from '../contract.ts';
import { expectContract, expectOneResultPerToolCall } from '../contract.ts';

function initSessionId(name: string): string {
  const line = readTranscript(name).find((l) => l.includes('"type":"init"'));
  return (JSON.parse(line ?? '{}') as { session_id: string }).session_id;
}

function ofType<T extends CliMessage['type']>(
  messages: readonly CliMessage[],
  type: T,
): Array<Extract<CliMessage, { type: T }>> {
  return messages.filter((m): m is Extract<CliMessage, { type: T }> => m.type === type);
}

describe('every recorded gemini transcript', () => {
  const names = transcriptNames();

  it('is present (the recordings exist)', () => {
    expect(names.length).toBeGreaterThanOrEqual(20);
  });

  it.each(names)('%s: every message matches the contract schema and there is exactly one terminal, last', (name) => {
    expectContract(mapRecorded(name));
  });

  it.each(names)('%s: the assistant deltas are exactly the text gemini streamed, and there is no thinking', (name) => {
    const messages = mapRecorded(name);
    expect(assistantText(messages)).toBe(expectedAssistantText(readTranscript(name)));
    expect(ofType(messages, 'assistant.thought')).toEqual([]);
  });

  it.each(names)('%s: one tool.call and exactly one result per tool id, the call first', (name) => {
    const messages = mapRecorded(name);
    expectOneResultPerToolCall(messages);
  });

  it.each(names)('%s: the failure text and stderr carry none of the startup noise or stack frames', (name) => {
    const terminal = terminalOf(mapRecorded(name));
    if (terminal.type !== 'terminal.failed') return;
    for (const text of [terminal.content.text, terminal.content.stderr]) {
      expect(text).not.toMatch(/Ripgrep is not available|256-color support|\[STARTUP\]|^\s+at /m);
    }
  });
});

describe('gemini mapper: one rule at a time, on the recordings', () => {
  it('init is session.started; the session asked for is session.resumed', () => {
    const id = initSessionId('resume');
    expect(mapRecorded('text')[0]).toEqual({ type: 'session.started', content: { sessionId: initSessionId('text') } });
    expect(mapRecorded('resume', { resumeSessionId: id })[0]).toEqual({
      type: 'session.resumed',
      content: { sessionId: id },
    });
    expect(mapRecorded('resume', { resumeSessionId: '5d1ccf9e-0000-4000-8000-000000000000' })[0]?.type).toBe(
      'session.started',
    );
  });

  it('a text answer: one assistant delta per chunk, exact, then terminal.completed with the usage of the stats', () => {
    const messages = mapRecorded('text');
    expect(ofType(messages, 'assistant').map((m) => m.content.text)).toEqual([
      'Hello',
      ' from the',
      ' fake',
      ' model.',
    ]);
    expect(terminalOf(messages)).toEqual({
      type: 'terminal.completed',
      content: { stopReason: 'stop', usage: { input: 42, output: 12, cacheRead: 0, totalTokens: 54 } },
    });
  });

  it('thought parts from the model never reach stdout: the text alone, no assistant.thought', () => {
    const messages = mapRecorded('thinking');
    expect(readTranscript('thinking').join('\n')).not.toContain('think about it');
    expect(assistantText(messages)).toBe('Hello there.');
    expect(ofType(messages, 'assistant.thought')).toEqual([]);
  });

  it('a tool turn (yolo): tool.call with the shell command, tool.completed with its output, then the answer', () => {
    const messages = mapRecorded('tool');
    const [call] = ofType(messages, 'tool.call');
    expect(call?.content).toMatchObject({
      name: 'run_shell_command',
      arguments: { command: 'echo hi', description: 'Run a command' },
    });
    expect(ofType(messages, 'tool.completed')).toEqual([
      {
        type: 'tool.completed',
        content: { toolCallId: call?.content.toolCallId, name: 'run_shell_command', result: 'hi' },
      },
    ]);
    expect(assistantText(messages)).toBe('I will run a command.The command printed: hi');
    expect(terminalOf(messages).type).toBe('terminal.completed');
  });

  it.each(['tool-default-mode', 'tool-auto-edit'])(
    '%s: the shell is not registered: tool.failed (tool_not_registered), and the turn completes',
    (name) => {
      const messages = mapRecorded(name);
      const failed = ofType(messages, 'tool.failed');
      expect(failed).toHaveLength(1);
      expect(failed[0]?.content.name).toBe('run_shell_command');
      expect(failed[0]?.content.error).toMatchObject({ type: 'tool_not_registered' });
      expect(terminalOf(messages).type).toBe('terminal.completed');
    },
  );

  it('a command that exits non-zero is still a completed tool (gemini reports success with its output)', () => {
    const messages = mapRecorded('tool-fail');
    expect(ofType(messages, 'tool.completed')).toHaveLength(1);
    expect(JSON.stringify(ofType(messages, 'tool.completed')[0]?.content.result)).toContain('nonexistent-fake-dir');
  });

  it('two calls in one response: two calls, two results, in order', () => {
    const messages = mapRecorded('two-tools');
    expect(ofType(messages, 'tool.call').map((m) => (m.content.arguments as { command: string }).command)).toEqual([
      'echo one',
      'echo two',
    ]);
    expect(ofType(messages, 'tool.completed').map((m) => m.content.result)).toEqual(['one', 'two']);
  });

  it.each([
    ['http400', 'bad_request', 144, 400],
    ['http401', 'auth', 145, 401],
    ['http429', 'rate_limited', 173, 429],
    ['http500', 'server_error', 244, 500],
    ['http503', 'server_error', 247, 503],
  ] as const)(
    '%s: terminal.failed %s, exit %i (HTTP %i truncated to 8 bits), the prompt not recorded',
    (name, category, exitCode, _status) => {
      const content = failure(mapRecorded(name));
      expect(content).toMatchObject({ category, exitCode, promptRecorded: false });
      expect(content.agentError).toMatch(/^\[API Error: /);
    },
  );

  it('the 429 message has no status in it: the category comes from the exit code alone', () => {
    const lines = readTranscript('http429');
    expect(lines.join('\n')).not.toMatch(/\b429\b/);
    expect(failure(mapLines(lines, { ...recordedExit('http429'), exitCode: 1 })).category).not.toBe('rate_limited');
  });

  it('a connection closed mid-stream: the partial text is kept, category network', () => {
    const messages = mapRecorded('midclose');
    expect(assistantText(messages)).toBe('Partial answer');
    expect(failure(messages)).toMatchObject({
      category: 'network',
      exitCode: 1,
      agentError: '[API Error: terminated]',
    });
  });

  it("an empty response: the error event's text, category server_error (gemini calls it transient), exit 0", () => {
    const content = failure(mapRecorded('empty-response'));
    expect(content.text).toContain('empty response with no text or thoughts');
    expect(content).toMatchObject({ category: 'server_error', exitCode: 0 });
  });

  it('a failure after a tool turn: the prompt and the tool turn are recorded in the chat (promptRecorded)', () => {
    expect(failure(mapRecorded('tool-then-500'))).toMatchObject({
      category: 'server_error',
      exitCode: 244,
      promptRecorded: true,
    });
  });

  it("gemini's own retries, printed on stderr only, are surfaced as agent.retry before the terminal", () => {
    const messages = mapRecorded('retries-on');
    const retries = ofType(messages, 'agent.retry');
    expect(retries).toHaveLength(1);
    expect(retries[0]?.content).toMatchObject({ phase: 'start', attempt: 1 });
    expect(retries[0]?.content.errorText).toContain('status 500');
    expect(messages.indexOf(retries[0]!)).toBe(messages.length - 2);
    expect(failure(messages).category).toBe('server_error');
  });

  it.each(['sigterm-during-tool', 'sigint-during-tool'])(
    '%s: exit 0 with no result is a crash; the open tool call gets a tool.failed',
    (name) => {
      const messages = mapRecorded(name);
      expect(ofType(messages, 'tool.failed')).toHaveLength(1);
      expect(failure(messages)).toMatchObject({ category: 'process_crash', exitCode: 0, promptRecorded: true });
      expect(failure(messages).text).toContain('before its result event');
    },
  );

  it('stopped by sessiond: on request is process_crash, on idle timeout is timeout', () => {
    expect(failure(mapRecorded('sigterm-streaming', {}, { stopReason: 'requested' }))).toMatchObject({
      category: 'process_crash',
    });
    expect(failure(mapRecorded('sigterm-streaming', {}, { stopReason: 'idle_timeout' }))).toMatchObject({
      category: 'timeout',
    });
    expect(assistantText(mapRecorded('sigterm-streaming'))).toBe('Hel');
  });

  it('killed by a signal is process_crash with the signal', () => {
    expect(failure(mapRecorded('sigterm-streaming', {}, { exitCode: null, signal: 'SIGKILL' }))).toMatchObject({
      category: 'process_crash',
      signal: 'SIGKILL',
    });
  });

  it.each([
    ['resume-unknown', 'bad_request', 42, /Error resuming session/],
    ['resume-after-failed-first-request', 'bad_request', 42, /No previous sessions/],
    ['no-auth-type', 'auth', 41, /Invalid auth method/],
    ['no-api-key', 'auth', 41, /GEMINI_API_KEY/],
    ['untrusted', 'startup', 55, /trusted directory/],
  ] as const)('%s: exit %s with nothing on stdout is %s, with the stderr', (name, category, exitCode, stderr) => {
    const content = failure(mapRecorded(name));
    expect(content).toMatchObject({ category, exitCode, promptRecorded: false });
    expect(content.text).toContain(`exit ${exitCode}`);
    expect(content.stderr).toMatch(stderr);
  });

  it('stopped for not exiting after its result: the result decides', () => {
    expect(
      terminalOf(mapRecorded('text', {}, { exitCode: null, signal: 'SIGKILL', stopReason: 'exit_grace' })).type,
    ).toBe('terminal.completed');
    expect(
      failure(mapRecorded('http500', {}, { exitCode: null, signal: 'SIGKILL', stopReason: 'exit_grace' })).category,
    ).toBe('server_error');
  });

  it('a success result with a non-zero exit is not a success', () => {
    expect(failure(mapRecorded('text', {}, { exitCode: 3 }))).toMatchObject({ category: 'process_crash', exitCode: 3 });
  });
});

describe('gemini mapper: edge cases', () => {
  const INIT = '{"type":"init","session_id":"0f1e2d3c-0000-4000-8000-000000000001","model":"m"}';
  const SUCCESS =
    '{"type":"result","status":"success","stats":{"input_tokens":1,"output_tokens":2,"total_tokens":3,"cached":0}}';

  it('a process that cannot start is a startup failure', () => {
    expect(failure(mapLines([], { ...CLEAN_EXIT, exitCode: null, spawnError: 'spawn gemini ENOENT' }))).toMatchObject({
      category: 'startup',
    });
  });

  it('nothing on stdout and exit 0 is invalid_output; an unknown exit code is process_crash', () => {
    expect(failure(mapLines([])).category).toBe('invalid_output');
    expect(failure(mapLines([], { ...CLEAN_EXIT, exitCode: 1 })).category).toBe('process_crash');
    expect(failure(mapLines([], { ...CLEAN_EXIT, exitCode: 244 })).category).toBe('server_error');
  });

  it('bad lines are kept: listed in the completed terminal, and named in a failure', () => {
    const completed = terminalOf(mapLines([INIT, 'not json', '{"no":"type"}', SUCCESS]));
    expect(completed.type === 'terminal.completed' && completed.content.invalid_output_lines).toEqual([
      'line 2: not JSON: not json',
      'line 3: JSON without a string "type": {"no":"type"}',
    ]);
    const failed = failure(mapLines([INIT, 'garbage']));
    expect(failed.invalid_output_lines).toEqual(['line 2: not JSON: garbage']);
    expect(failed.text).toContain('1 invalid output line(s)');
  });

  it('a second init, a second result and anything after the result are ignored', () => {
    const second = INIT.replace('0001', '0002');
    const messages = mapLines([
      INIT,
      second,
      SUCCESS,
      '{"type":"message","role":"assistant","content":"late","delta":true}',
      '{"type":"result","status":"error"}',
    ]);
    expect(messages.map((m) => m.type)).toEqual(['session.started', 'terminal.completed']);
  });

  it('a tool_result for a call never announced still gives one call and one result; a repeated result is dropped', () => {
    const result = '{"type":"tool_result","tool_id":"t1","status":"success","output":"x"}';
    const messages = mapLines([INIT, result, result, SUCCESS]);
    expect(messages.map((m) => m.type)).toEqual([
      'session.started',
      'tool.call',
      'tool.completed',
      'terminal.completed',
    ]);
  });

  it('a result error without a message and without an error event still says what happened', () => {
    expect(failure(mapLines([INIT, '{"type":"result","status":"error"}'])).text).toContain('status "error"');
  });

  it('a retryDelay in the error JSON becomes retryAfterMs', () => {
    const message = JSON.stringify(
      '[API Error: {"error":{"code":429,"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"7s"}]}}]',
    );
    expect(
      failure(
        mapLines([INIT, `{"type":"result","status":"error","error":{"type":"unknown","message":${message}}}`], {
          ...CLEAN_EXIT,
          exitCode: 173,
        }),
      ),
    ).toMatchObject({
      category: 'rate_limited',
      retryAfterMs: 7000,
    });
  });

  it('complete() is answered once; lines after it are ignored', () => {
    const mapper = new GeminiMapper();
    mapper.push(INIT);
    expect(mapper.complete(CLEAN_EXIT)).toHaveLength(1);
    expect(mapper.complete(CLEAN_EXIT)).toEqual([]);
    expect(mapper.push(SUCCESS)).toEqual([]);
  });

  it('agentEnded turns true at the result', () => {
    const mapper = new GeminiMapper();
    mapper.push(INIT);
    expect(mapper.agentEnded).toBe(false);
    mapper.push(SUCCESS);
    expect(mapper.agentEnded).toBe(true);
  });

  it('assistant text is passed through exactly: whitespace, U+2028, empty deltas dropped', () => {
    const delta = (text: string) => JSON.stringify({ type: 'message', role: 'assistant', content: text, delta: true });
    const messages = mapLines([INIT, delta('  a\u2028b\n'), delta(''), delta('\ttail '), SUCCESS]);
    expect(ofType(messages, 'assistant').map((m) => m.content.text)).toEqual(['  a\u2028b\n', '\ttail ']);
  });
});
