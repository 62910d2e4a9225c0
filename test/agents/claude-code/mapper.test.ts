import { describe, expect, it } from 'vitest';
import { ClaudeCodeMapper } from '../../../src/agents/claude-code/mapper.ts';
import { FAILURE_CATEGORIES, isTerminal, type CliMessage } from '../../../src/protocol/index.ts';
import {
  assistantText,
  CLEAN_EXIT,
  expectedAssistantText,
  expectedThinking,
  hasStreamEvents,
  mapLines,
  readTranscript,
  recordedExit,
  thoughtText,
  transcriptNames,
  withoutCompletedBlocks,
  withoutStreamEvents,
} from './transcripts.ts';
import { expectContract, expectOneResultPerToolCall, failure, terminalOf } from '../contract.ts';

function mapRecorded(name: string): CliMessage[] {
  return mapLines(readTranscript(name), recordedExit(name));
}

function ev(value: Record<string, unknown>): string {
  return JSON.stringify(value);
}

const INIT = ev({ type: 'system', subtype: 'init', session_id: 's-1', cwd: '/w' });
const RESULT_OK = ev({
  type: 'result',
  subtype: 'success',
  is_error: false,
  result: 'ok',
  stop_reason: 'end_turn',
  usage: { input_tokens: 3, output_tokens: 4 },
  total_cost_usd: 0.5,
});

describe('every recorded Claude Code transcript', () => {
  const names = transcriptNames();

  it('is present (the recordings exist)', () => {
    expect(names.length).toBeGreaterThanOrEqual(20);
  });

  it.each(names)('%s: every message matches the contract schema and there is exactly one terminal, last', (name) => {
    expectContract(mapRecorded(name));
  });

  it.each(names)(
    '%s: the assistant text adds up exactly to the completed blocks, from deltas, from whole blocks, or both',
    (name) => {
      const lines = readTranscript(name);
      const expected = expectedAssistantText(lines);
      const exit = recordedExit(name);
      expect(assistantText(mapLines(lines, exit))).toBe(expected);
      expect(assistantText(mapLines(withoutStreamEvents(lines), exit))).toBe(
        expectedAssistantText(withoutStreamEvents(lines)),
      );
      if (hasStreamEvents(lines)) expect(assistantText(mapLines(withoutCompletedBlocks(lines), exit))).toBe(expected);
    },
  );

  it.each(names)('%s: all thinking is released once, in order', (name) => {
    const lines = readTranscript(name);
    expect(thoughtText(mapLines(lines, recordedExit(name)))).toBe(expectedThinking(lines));
    if (hasStreamEvents(lines))
      expect(thoughtText(mapLines(withoutCompletedBlocks(lines), recordedExit(name)))).toBe(expectedThinking(lines));
  });

  it.each(names)('%s: one tool.call and exactly one result per tool_use id, the call first', (name) => {
    const lines = readTranscript(name);
    for (const variant of [lines, withoutStreamEvents(lines), withoutCompletedBlocks(lines)])
      expectOneResultPerToolCall(mapLines(variant, recordedExit(name)));
  });

  it.each(names)('%s: the failure category is one of the closed set', (name) => {
    const terminal = terminalOf(mapRecorded(name));
    if (terminal.type === 'terminal.failed') expect(FAILURE_CATEGORIES).toContain(terminal.content.category);
  });
});

describe('session events', () => {
  it("system/init is session.started with Claude Code's session id", () => {
    const lines = readTranscript('text');
    const id = (JSON.parse(lines[0]!) as { session_id: string }).session_id;
    expect(mapLines(lines)[0]).toEqual({ type: 'session.started', content: { sessionId: id } });
  });

  it('the session the caller asked to resume is session.resumed (Claude Code keeps the id on --resume)', () => {
    const lines = readTranscript('resume-second');
    const id = (JSON.parse(lines[0]!) as { session_id: string }).session_id;
    expect(mapLines(lines, CLEAN_EXIT, { resumeSessionId: id })[0]).toEqual({
      type: 'session.resumed',
      content: { sessionId: id },
    });
    expect(mapLines(lines, CLEAN_EXIT, { resumeSessionId: '00000000-0000-4000-8000-000000000000' })[0]?.type).toBe(
      'session.started',
    );
  });

  it('a second init does not start a second session', () => {
    const messages = mapLines([INIT, INIT, RESULT_OK]);
    expect(messages.filter((m) => m.type === 'session.started')).toHaveLength(1);
  });
});

describe('assistant text and thinking', () => {
  it('with partial messages, text streams as deltas and the completed block adds nothing', () => {
    const messages = mapRecorded('text');
    expect(messages.filter((m) => m.type === 'assistant').length).toBeGreaterThan(1);
    expect(assistantText(messages)).toBe('Hello from the fake model.');
    expect(terminalOf(messages)).toMatchObject({ type: 'terminal.completed', content: { stopReason: 'end_turn' } });
  });

  it('without partial messages, each completed block is one assistant message', () => {
    const messages = mapRecorded('text-whole');
    expect(messages.filter((m) => m.type === 'assistant').map((m) => m.content)).toEqual([
      { text: 'Hello from the fake model.' },
    ]);
  });

  it('text of successive messages around a tool turn is kept in order, never repeated', () => {
    expect(assistantText(mapRecorded('tool'))).toBe('I will run a command.The command printed: hi');
    expect(assistantText(mapRecorded('tool-whole'))).toBe('I will run a command.The command printed: hi');
  });

  it('thinking is held back until the model stops for good, then released once as assistant.thought after the text', () => {
    for (const name of ['text', 'text-whole']) {
      const messages = mapRecorded(name);
      const thoughts = messages.filter((m) => m.type === 'assistant.thought');
      expect(thoughts.map((t) => t.content.text)).toEqual(['The user wants a greeting. I will answer briefly.']);
      expect(messages.indexOf(thoughts[0]!)).toBeGreaterThan(messages.findLastIndex((m) => m.type === 'assistant'));
    }
  });

  it('thinking of a tool turn waits for the final answer, in order, after the tool result', () => {
    const lines = [
      INIT,
      ev({ type: 'assistant', message: { id: 'm1', content: [{ type: 'thinking', thinking: 'first I plan. ' }] } }),
      ev({
        type: 'assistant',
        message: { id: 'm1', content: [{ type: 'tool_use', id: 't1', name: 'Bash', input: { command: 'ls' } }] },
      }),
      ev({
        type: 'user',
        message: { content: [{ type: 'tool_result', tool_use_id: 't1', content: 'a', is_error: false }] },
      }),
      ev({ type: 'assistant', message: { id: 'm2', content: [{ type: 'thinking', thinking: 'then I answer.' }] } }),
      ev({ type: 'assistant', message: { id: 'm2', content: [{ type: 'text', text: 'Done.' }] } }),
      RESULT_OK,
    ];
    const messages = mapLines(lines);
    expect(messages.filter((m) => m.type === 'assistant.thought').map((t) => t.content.text)).toEqual([
      'first I plan. ',
      'then I answer.',
    ]);
    expect(messages.map((m) => m.type)).toEqual([
      'session.started',
      'tool.call',
      'tool.completed',
      'assistant',
      'assistant.thought',
      'assistant.thought',
      'terminal.completed',
    ]);
  });

  it('a completed block that comes after content_block_stop still adds nothing streamed twice', () => {
    const stream = (event: Record<string, unknown>) => ev({ type: 'stream_event', event });
    const lines = [
      INIT,
      stream({ type: 'message_start', message: { id: 'm1' } }),
      stream({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }),
      stream({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hel' } }),
      stream({ type: 'content_block_stop', index: 0 }),
      stream({ type: 'message_delta', delta: { stop_reason: 'end_turn' } }),
      ev({ type: 'assistant', message: { id: 'm1', content: [{ type: 'text', text: 'Hello' }] } }),
      RESULT_OK,
    ];
    expect(assistantText(mapLines(lines))).toBe('Hello');
  });

  it("Claude Code's own error message (model <synthetic>) is not assistant text", () => {
    const messages = mapRecorded('http500');
    expect(messages.some((m) => m.type === 'assistant')).toBe(false);
  });

  it('text streamed before the connection dropped is kept', () => {
    expect(assistantText(mapRecorded('midclose'))).toBe('Partial answer');
  });
});

describe('tools', () => {
  it('a tool turn gives one tool.call with the full input, and one tool.completed with the result', () => {
    const messages = mapRecorded('tool');
    const call = messages.find((m) => m.type === 'tool.call');
    expect(call?.content).toEqual({
      toolCallId: 'toolu_fake_1_0',
      name: 'Bash',
      arguments: { command: 'echo hi', description: 'Run a command' },
    });
    const done = messages.filter((m) => m.type === 'tool.completed');
    expect(done).toHaveLength(1);
    expect(done[0]!.content).toMatchObject({ toolCallId: 'toolu_fake_1_0', name: 'Bash', result: { content: 'hi' } });
  });

  it('a failing tool and a tool denied by the permission mode are tool.failed; the turn still completes', () => {
    for (const name of ['tool-fail', 'tool-denied']) {
      const messages = mapRecorded(name);
      expect(messages.filter((m) => m.type === 'tool.failed')).toHaveLength(1);
      expect(terminalOf(messages).type).toBe('terminal.completed');
    }
    expect(mapRecorded('tool-accept-edits').filter((m) => m.type === 'tool.completed')).toHaveLength(1);
  });

  it('two tool calls each get their call and their result', () => {
    const messages = mapRecorded('two-tools');
    expect(
      new Set(
        messages.filter((m) => m.type === 'tool.call').map((m) => (m.content as { toolCallId: string }).toolCallId),
      ).size,
    ).toBe(2);
    expect(messages.filter((m) => m.type === 'tool.completed')).toHaveLength(2);
  });

  it('a tool cut off by a kill gets one tool.failed before the terminal', () => {
    const lines = readTranscript('sigterm-long-tool');
    const cut = lines.slice(0, lines.findIndex((l) => l.includes('"task_started"')) + 1);
    const messages = mapLines(cut, { exitCode: null, signal: 'SIGKILL', stopReason: 'requested', stderrTail: '' });
    expect(messages.slice(-3).map((m) => m.type)).toEqual(['tool.call', 'tool.failed', 'terminal.failed']);
  });

  it('subagent events (parent_tool_use_id set) stay inside their tool call', () => {
    const lines = [
      INIT,
      ev({
        type: 'assistant',
        parent_tool_use_id: 'task-1',
        message: { id: 'sub', content: [{ type: 'text', text: 'sub text' }] },
      }),
      ev({ type: 'assistant', message: { id: 'm1', content: [{ type: 'text', text: 'main' }] } }),
      RESULT_OK,
    ];
    expect(assistantText(mapLines(lines))).toBe('main');
  });
});

describe('terminal failures and their category', () => {
  it.each([
    ['http401', 'auth'],
    ['http429', 'rate_limited'],
    ['http500', 'server_error'],
    ['http500-whole', 'server_error'],
    ['http529', 'server_error'],
    ['midclose', 'network'],
  ] as const)(
    "%s (result subtype success, is_error true, exit 1) is terminal.failed %s with Claude Code's error text",
    (name, category) => {
      const content = failure(mapRecorded(name));
      expect(content.category).toBe(category);
      expect(content.agentError).toBeTruthy();
      expect(content.text).toContain(content.agentError);
      expect(content.exitCode).toBe(1);
    },
  );

  it('is_error with subtype success is a failure even with exit code 0', () => {
    const lines = readTranscript('http500');
    expect(failure(mapLines(lines, CLEAN_EXIT)).category).toBe('server_error');
  });

  it('the category comes from api_error_status first, then from the error text', () => {
    const result = (extra: Record<string, unknown>) =>
      mapLines([INIT, ev({ type: 'result', subtype: 'success', is_error: true, ...extra })]);
    expect(failure(result({ api_error_status: 403, result: 'whatever' })).category).toBe('auth');
    expect(failure(result({ api_error_status: 400, result: 'whatever' })).category).toBe('bad_request');
    expect(failure(result({ api_error_status: null, result: 'API Error: Request timed out.' })).category).toBe(
      'timeout',
    );
    expect(failure(result({ result: 'rate limited, retry after 7 seconds' }))).toMatchObject({
      category: 'rate_limited',
      retryAfterMs: 7000,
    });
    expect(failure(result({ subtype: 'error_max_turns', result: '' })).category).toBe('bad_request');
    expect(failure(result({ result: 'something odd' })).category).toBe('unknown');
  });

  it("Claude Code's own retries are surfaced as agent.retry, and the final error still decides", () => {
    const messages = mapRecorded('http500-own-retries');
    const retries = messages.filter((m) => m.type === 'agent.retry');
    expect(retries).toHaveLength(1);
    expect(retries[0]!.content).toMatchObject({
      phase: 'start',
      attempt: 1,
      maxAttempts: 1,
      errorText: '500 server_error',
    });
    expect(failure(messages).category).toBe('server_error');
  });

  it('an interrupt from outside (SIGINT: aborted_streaming / aborted_tools, exit 0) is process_crash', () => {
    for (const name of ['sigint-streaming', 'sigint-long-tool', 'sigint-long-tool-bg']) {
      const content = failure(mapRecorded(name));
      expect(content.category).toBe('process_crash');
      expect(content.text).toMatch(/interrupted \(aborted_(streaming|tools)\)/);
    }
  });

  it('SIGTERM (exit 143, no result) is process_crash', () => {
    for (const name of ['sigterm-streaming', 'sigterm-long-tool'])
      expect(failure(mapRecorded(name))).toMatchObject({ category: 'process_crash', exitCode: 143 });
  });

  it('a stop sessiond asked for is reported as such, whatever Claude Code printed', () => {
    const content = failure(
      mapLines(readTranscript('sigint-long-tool'), {
        exitCode: 0,
        signal: null,
        stopReason: 'requested',
        stderrTail: '',
      }),
    );
    expect(content.text).toBe('the agent was stopped on request');
  });

  it('--resume of a session Claude Code does not have is a startup failure with its message', () => {
    const content = failure(mapRecorded('resume-missing'));
    expect(content).toMatchObject({ category: 'startup', promptRecorded: false });
    expect(content.text).toContain('No conversation found');
  });

  it('exit 1 with no event (bad flags, refused option) is a startup failure with the stderr tail', () => {
    const content = failure(
      mapLines([], { exitCode: 1, signal: null, stopReason: null, stderrTail: "error: unknown option '--bogus'\n" }),
    );
    expect(content.category).toBe('startup');
    expect(content.text).toContain("unknown option '--bogus'");
  });

  it('a stream that stops without its result is a failure even with exit code 0, keeping the text', () => {
    const lines = readTranscript('text');
    const cut = lines.slice(0, lines.findIndex((l) => l.includes('" fake"')) + 1);
    expect(failure(mapLines(cut))).toMatchObject({ category: 'process_crash' });
    expect(assistantText(mapLines(cut)).length).toBeGreaterThan(0);
  });

  it('an idle timeout is category timeout; a failure to spawn is category startup', () => {
    expect(
      failure(mapLines([INIT], { exitCode: null, signal: 'SIGKILL', stopReason: 'idle_timeout', stderrTail: '' }))
        .category,
    ).toBe('timeout');
    expect(
      failure(
        mapLines([], {
          exitCode: null,
          signal: null,
          stopReason: null,
          stderrTail: '',
          spawnError: 'spawn claude ENOENT',
        }),
      ).category,
    ).toBe('startup');
  });

  it('after its result, an agent stopped for not exiting (exit_grace) still completes', () => {
    const terminal = terminalOf(
      mapLines(readTranscript('text'), { exitCode: null, signal: 'SIGINT', stopReason: 'exit_grace', stderrTail: '' }),
    );
    expect(terminal.type).toBe('terminal.completed');
  });

  it('usage and cost come from the result', () => {
    expect(terminalOf(mapLines([INIT, RESULT_OK]))).toEqual({
      type: 'terminal.completed',
      content: { stopReason: 'end_turn', usage: { input: 3, output: 4, cost: 0.5 } },
    });
  });
});

describe('promptRecorded', () => {
  it('is true once an event followed init (Claude Code wrote the prompt before its first request)', () => {
    expect(failure(mapRecorded('http500')).promptRecorded).toBe(true);
    expect(failure(mapRecorded('http500-whole')).promptRecorded).toBe(true);
  });

  it('is false when the agent died right after init, or saves no session', () => {
    expect(
      failure(mapLines([INIT], { exitCode: null, signal: 'SIGKILL', stopReason: null, stderrTail: '' })).promptRecorded,
    ).toBe(false);
    expect(
      failure(mapLines(readTranscript('http500'), recordedExit('http500'), { persistsSession: false })).promptRecorded,
    ).toBe(false);
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
    expect((terminal.content as { invalid_output_lines: string[] }).invalid_output_lines).toHaveLength(4);
    expect((terminal.content as { invalid_output_lines: string[] }).invalid_output_lines[0]).toContain(
      'not json at all',
    );
  });

  it('no usable events at all is invalid_output, listing the bad lines', () => {
    const content = failure(mapLines(['Segmentation fault', '{"no":"type"}'], CLEAN_EXIT));
    expect(content.category).toBe('invalid_output');
    expect(content.invalid_output_lines).toHaveLength(2);
  });

  it('after complete() the mapper is spent', () => {
    const mapper = new ClaudeCodeMapper();
    for (const line of readTranscript('text').slice(0, 5)) mapper.push(line);
    expect(mapper.complete(CLEAN_EXIT).filter(isTerminal)).toHaveLength(1);
    expect(mapper.push(RESULT_OK)).toEqual([]);
    expect(mapper.complete(CLEAN_EXIT)).toEqual([]);
  });
});
