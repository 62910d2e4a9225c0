import { describe, expect, it } from 'vitest';
import { CodexMapper } from '../../../src/agents/codex/mapper.ts';
import { isTerminal } from '../../../src/protocol/index.ts';
import {
  assistantText,
  CLEAN_EXIT,
  ev,
  expectedAssistantText,
  expectedThinking,
  mapLines,
  mapRecorded,
  readTranscript,
  recordedExit,
  thoughtText,
  transcriptNames,
} from './transcripts.ts';
import { expectContract, expectOneResultPerToolCall, failure, terminalOf } from '../contract.ts';

const THREAD = '01a22958-c3ff-74e2-a8e3-aae33327962b';
const started = [ev({ type: 'thread.started', thread_id: THREAD }), ev({ type: 'turn.started' })];
const completed = ev({
  type: 'turn.completed',
  usage: {
    input_tokens: 10,
    cached_input_tokens: 4,
    cache_write_input_tokens: 0,
    output_tokens: 5,
    reasoning_output_tokens: 0,
  },
});
const command = (phase: string, id: string, extra: Record<string, unknown> = {}) =>
  ev({
    type: phase,
    item: {
      id,
      type: 'command_execution',
      command: "/bin/bash -lc 'ls'",
      aggregated_output: '',
      exit_code: null,
      status: 'in_progress',
      ...extra,
    },
  });

describe('every recorded codex transcript', () => {
  const names = transcriptNames();

  it('is present (the recordings exist)', () => {
    expect(names.length).toBeGreaterThanOrEqual(20);
  });

  it.each(names)('%s: every message matches the contract schema and there is exactly one terminal, last', (name) => {
    expectContract(mapRecorded(name));
  });

  it.each(names)(
    '%s: the assistant text is exactly the agent_message items, each once; the thinking is the reasoning items',
    (name) => {
      const lines = readTranscript(name);
      const messages = mapRecorded(name);
      expect(assistantText(messages)).toBe(expectedAssistantText(lines));
      expect(messages.filter((m) => m.type === 'assistant')).toHaveLength(
        lines.filter((l) => l.includes('"type":"agent_message"')).length,
      );
      expect(thoughtText(messages)).toBe(expectedThinking(lines));
    },
  );

  it.each(names)('%s: one tool.call and exactly one result per toolCallId, the call first', (name) => {
    const messages = mapRecorded(name);
    expectOneResultPerToolCall(messages);
  });
});

describe('thread events', () => {
  it('thread.started of a new thread is session.started with the thread id', () => {
    const messages = mapRecorded('session-first');
    const id = (JSON.parse(readTranscript('session-first')[0]!) as { thread_id: string }).thread_id;
    expect(messages[0]).toEqual({ type: 'session.started', content: { sessionId: id } });
  });

  it('the thread the caller asked to resume is session.resumed (same id), another id is session.started', () => {
    const id = (JSON.parse(readTranscript('session-resume')[0]!) as { thread_id: string }).thread_id;
    expect(mapRecorded('session-resume', { resumeSessionId: id })[0]).toEqual({
      type: 'session.resumed',
      content: { sessionId: id },
    });
    expect(mapRecorded('session-resume', { resumeSessionId: id.toUpperCase() })[0]?.type).toBe('session.resumed');
    expect(mapRecorded('session-resume', { resumeSessionId: THREAD })[0]?.type).toBe('session.started');
  });

  it('a resumed turn with a tool call maps like a new one', () => {
    const types = mapRecorded('session-resume').map((m) => m.type);
    expect(types).toEqual(['session.started', 'tool.call', 'tool.completed', 'assistant', 'terminal.completed']);
  });
});

describe('assistant text and thinking', () => {
  it('a whole agent_message is one assistant message with the whole text (Codex sends no deltas)', () => {
    const messages = mapRecorded('text');
    expect(messages.filter((m) => m.type === 'assistant')).toEqual([
      { type: 'assistant', content: { text: 'Hello from the fake model.' } },
    ]);
  });

  it('reasoning is held back and released as assistant.thought after the text, before the terminal', () => {
    const messages = mapRecorded('text');
    expect(messages.map((m) => m.type)).toEqual([
      'session.started',
      'assistant',
      'assistant.thought',
      'terminal.completed',
    ]);
    expect(thoughtText(messages)).toBe('**Greeting**\n\nThe user wants a greeting.');
  });

  it('reasoning during a tool turn is released once, at the end, in order', () => {
    const lines = [
      ...started,
      ev({ type: 'item.completed', item: { id: 'item_0', type: 'reasoning', text: 'first I plan. ' } }),
      command('item.started', 'item_1'),
      command('item.completed', 'item_1', { exit_code: 0, status: 'completed', aggregated_output: 'x\n' }),
      ev({ type: 'item.completed', item: { id: 'item_2', type: 'reasoning', text: 'then I answer.' } }),
      ev({ type: 'item.completed', item: { id: 'item_3', type: 'agent_message', text: 'Done.' } }),
      completed,
    ];
    const messages = mapLines(lines);
    expect(messages.filter((m) => m.type === 'assistant.thought').map((m) => m.content)).toEqual([
      { text: 'first I plan. ' },
      { text: 'then I answer.' },
    ]);
    expect(messages.findIndex((m) => m.type === 'assistant.thought')).toBeGreaterThan(
      messages.findIndex((m) => m.type === 'tool.completed'),
    );
  });

  it('text before a tool call and the answer after it come in order', () => {
    expect(mapRecorded('text-tool-text').map((m) => m.type)).toEqual([
      'session.started',
      'assistant',
      'tool.call',
      'tool.completed',
      'assistant',
      'terminal.completed',
    ]);
  });

  it('the same item reported twice gives its text once', () => {
    const message = ev({ type: 'item.completed', item: { id: 'item_0', type: 'agent_message', text: 'Once.' } });
    expect(assistantText(mapLines([...started, message, message, completed]))).toBe('Once.');
  });

  it('a warning item (type error, e.g. unknown model metadata) is no message and does not fail the turn', () => {
    const messages = mapRecorded('unknown-model');
    expect(messages.map((m) => m.type)).toEqual(['session.started', 'assistant', 'terminal.completed']);
  });
});

describe('tools', () => {
  it('a command_execution gives one tool.call (its command) and one tool.completed (output, exit code 0)', () => {
    const messages = mapRecorded('tool');
    const call = messages.find((m) => m.type === 'tool.call');
    expect(call?.content).toEqual({
      toolCallId: 'item_0',
      name: 'command_execution',
      arguments: { command: "/bin/bash -lc 'echo hi'" },
    });
    const done = messages.filter((m) => m.type === 'tool.completed');
    expect(done).toHaveLength(1);
    expect(done[0]?.content).toMatchObject({ toolCallId: 'item_0', result: { output: 'hi\n', exitCode: 0 } });
  });

  it('a command with a non-zero exit code is tool.failed with its output and exit code', () => {
    const messages = mapRecorded('tool-fail');
    expect(messages.filter((m) => m.type === 'tool.completed')).toHaveLength(0);
    const failed = messages.filter((m) => m.type === 'tool.failed');
    expect(failed).toHaveLength(1);
    expect(failed[0]?.content).toMatchObject({
      error: { exitCode: 3, output: expect.stringContaining('/nonexistent-fake-dir') },
    });
  });

  it('two commands each get their call and their result', () => {
    const messages = mapRecorded('two-tools');
    expect(messages.filter((m) => m.type === 'tool.call')).toHaveLength(2);
    expect(messages.filter((m) => m.type === 'tool.completed')).toHaveLength(2);
  });

  it('a write the read-only sandbox denied leaves no item in the stream: no tool message, the turn completes', () => {
    const messages = mapRecorded('tool-sandbox-denied');
    expect(messages.map((m) => m.type)).toEqual(['session.started', 'assistant', 'terminal.completed']);
  });

  it('the same write under workspace-write is a completed tool call', () => {
    const messages = mapRecorded('tool-workspace-write');
    expect(messages.filter((m) => m.type === 'tool.completed')).toHaveLength(1);
  });

  it('output reported while a command runs (item.updated) is a tool.update with the partial output', () => {
    const messages = mapLines([
      ...started,
      command('item.started', 'c1'),
      command('item.updated', 'c1', { aggregated_output: 'partial\n' }),
      command('item.completed', 'c1', { exit_code: 0, status: 'completed', aggregated_output: 'partial\ndone\n' }),
      completed,
    ]);
    expect(messages.filter((m) => m.type === 'tool.update').map((m) => m.content)).toEqual([
      {
        toolCallId: 'c1',
        name: 'command_execution',
        arguments: { command: "/bin/bash -lc 'ls'" },
        partialResult: { output: 'partial\n' },
      },
    ]);
  });

  it('a result without a started item still gives the call first, then one result', () => {
    const messages = mapLines([
      ...started,
      command('item.completed', 'c2', { exit_code: 0, status: 'completed' }),
      completed,
    ]);
    expect(messages.map((m) => m.type)).toEqual([
      'session.started',
      'tool.call',
      'tool.completed',
      'terminal.completed',
    ]);
  });

  it('a file_change item is a tool call too, failed when its status is not completed', () => {
    const change = (status: string) =>
      ev({
        type: 'item.completed',
        item: { id: 'f1', type: 'file_change', changes: [{ path: 'a.txt', kind: 'add' }], status },
      });
    expect(
      mapLines([...started, change('completed'), completed]).filter((m) => m.type === 'tool.completed'),
    ).toHaveLength(1);
    expect(mapLines([...started, change('failed'), completed]).filter((m) => m.type === 'tool.failed')).toHaveLength(1);
  });

  it.each(['sigint-during-tool', 'sigterm-during-tool', 'sigterm-during-tool-full-access'])(
    '%s: a command still running when Codex dies gets one tool.failed before the terminal',
    (name) => {
      expect(mapRecorded(name).map((m) => m.type)).toEqual([
        'session.started',
        'tool.call',
        'tool.failed',
        'terminal.failed',
      ]);
    },
  );
});

describe('terminal failures and their category', () => {
  it.each([
    ['http500', 'server_error'],
    ['http400', 'bad_request'],
    ['http401', 'auth'],
    ['http429', 'rate_limited'],
    ['http503', 'server_error'],
    ['midclose', 'network'],
    ['response-failed', 'network'],
    ['context-window', 'bad_request'],
    ['at-capacity', 'server_error'],
    ['rate-limit-failed', 'rate_limited'],
  ] as const)(
    "%s (turn.failed, exit 1) is terminal.failed with category %s and Codex's own error text",
    (name, category) => {
      const content = failure(mapRecorded(name));
      expect(content.category).toBe(category);
      expect(content.exitCode).toBe(1);
      expect(content.agentError).toBeTruthy();
      expect(content.text).toContain(content.agentError);
      const lines = readTranscript(name);
      const failed = JSON.parse(lines.find((l) => l.includes('"turn.failed"'))!) as { error: { message: string } };
      expect(content.agentError).toBe(failed.error.message);
    },
  );

  it("HTTP 500: Codex's canned text is all there is, and it stands for a server error", () => {
    const content = failure(mapRecorded('http500'));
    expect(content.agentError).toBe('We’re currently experiencing high demand, which may cause temporary errors.');
    expect(content.category).toBe('server_error');
  });

  it('a rate limit that says when to try again carries retryAfterMs', () => {
    expect(failure(mapRecorded('rate-limit-failed')).retryAfterMs).toBe(20_000);
  });

  it('once the turn started, the failure says the prompt is recorded in the thread (a retry continues it)', () => {
    for (const name of ['http500', 'midclose', 'sigint-during-tool', 'sigint-streaming'])
      expect(failure(mapRecorded(name)).promptRecorded).toBe(true);
    expect(failure(mapRecorded('http500', { persistsSession: false })).promptRecorded).toBe(false);
  });

  it("Codex's own retries (when its config turns them on) are agent.retry start events, then one end with the outcome", () => {
    const messages = mapRecorded('http500-agent-retries');
    const retries = messages.filter((m) => m.type === 'agent.retry').map((m) => m.content);
    expect(retries).toEqual([
      {
        phase: 'start',
        attempt: 1,
        maxAttempts: 2,
        errorText: 'We’re currently experiencing high demand, which may cause temporary errors.',
      },
      {
        phase: 'start',
        attempt: 2,
        maxAttempts: 2,
        errorText: 'We’re currently experiencing high demand, which may cause temporary errors.',
      },
      {
        phase: 'end',
        success: false,
        errorText: 'We’re currently experiencing high demand, which may cause temporary errors.',
      },
    ]);
    expect(failure(messages).category).toBe('server_error');
  });

  it('a retry that then succeeds ends with agent.retry success, then terminal.completed', () => {
    const lines = [
      ...started,
      ev({ type: 'error', message: 'Reconnecting... 1/5 (stream disconnected before completion: boom)' }),
      ev({ type: 'item.completed', item: { id: 'i', type: 'agent_message', text: 'ok' } }),
      completed,
    ];
    const types = mapLines(lines).map((m) => (m.type === 'agent.retry' ? `${m.type}:${m.content.phase}` : m.type));
    expect(types).toEqual([
      'session.started',
      'agent.retry:start',
      'assistant',
      'agent.retry:end',
      'terminal.completed',
    ]);
  });

  it('resuming a thread Codex has no rollout for (exit 1, no events) is a startup failure with its stderr', () => {
    const content = failure(
      mapRecorded('resume-unknown-thread', { resumeSessionId: '01a2294d-0000-7000-8000-000000000000' }),
    );
    expect(content.category).toBe('startup');
    expect(content.text).toContain('no rollout found');
    expect(content.promptRecorded).toBe(false);
  });

  it('a command line Codex rejects (exit code 2) is a startup failure naming the argument', () => {
    const content = failure(mapRecorded('bad-args'));
    expect(content.category).toBe('startup');
    expect(content.exitCode).toBe(2);
    expect(content.text).toContain("unexpected argument '--full-auto'");
  });

  it('SIGINT during a stream (exit 1, no closing events) is a process_crash', () => {
    const content = failure(mapRecorded('sigint-streaming'));
    expect(content.category).toBe('process_crash');
    expect(content.exitCode).toBe(1);
  });

  it('killed by SIGTERM is a process_crash naming the signal', () => {
    const content = failure(mapRecorded('sigterm-during-tool'));
    expect(content).toMatchObject({ category: 'process_crash', signal: 'SIGTERM' });
  });

  it('a stop sessiond asked for, an idle timeout and a spawn error are what they are, whatever was printed', () => {
    const lines = readTranscript('tool');
    expect(
      failure(mapLines(lines, { exitCode: 1, signal: null, stopReason: 'requested', stderrTail: '' })).category,
    ).toBe('process_crash');
    expect(
      failure(
        mapLines(lines.slice(0, 3), { exitCode: null, signal: 'SIGKILL', stopReason: 'idle_timeout', stderrTail: '' }),
      ).category,
    ).toBe('timeout');
    expect(
      failure(mapLines([], { exitCode: null, signal: null, stopReason: null, stderrTail: '', spawnError: 'ENOENT' }))
        .category,
    ).toBe('startup');
  });

  it('stopped during the exit grace after turn.completed still completes', () => {
    const messages = mapLines(readTranscript('text'), {
      exitCode: null,
      signal: 'SIGINT',
      stopReason: 'exit_grace',
      stderrTail: '',
    });
    expect(terminalOf(messages).type).toBe('terminal.completed');
  });

  it('exit 0 without any event is invalid_output; exit 0 without turn.completed is a process_crash', () => {
    expect(failure(mapLines(['not json'])).category).toBe('invalid_output');
    expect(failure(mapLines(started)).category).toBe('process_crash');
  });

  it('an exit code other than 0 after turn.completed is a failure, not a success', () => {
    expect(
      failure(mapLines(readTranscript('text'), { exitCode: 1, signal: null, stopReason: null, stderrTail: 'boom' }))
        .category,
    ).toBe('process_crash');
  });
});

describe('completion and bad lines', () => {
  it('turn.completed gives the usage', () => {
    expect(terminalOf(mapLines([...started, completed]))).toEqual({
      type: 'terminal.completed',
      content: { stopReason: 'stop', usage: { input: 10, output: 5, cacheRead: 4, cacheWrite: 0, totalTokens: 15 } },
    });
  });

  it('bad lines are kept as diagnostics in the terminal message and change nothing else', () => {
    const lines = readTranscript('tool');
    const withGarbage = [lines[0]!, 'Reading additional input from stdin...', '{"no":"type"}', ...lines.slice(1)];
    const messages = mapLines(withGarbage);
    const terminal = terminalOf(messages);
    expect(terminal.type).toBe('terminal.completed');
    expect(terminal.type === 'terminal.completed' ? terminal.content.invalid_output_lines : []).toEqual([
      'line 2: not JSON: Reading additional input from stdin...',
      'line 3: JSON without a string "type": {"no":"type"}',
    ]);
    expect(assistantText(messages)).toBe('The command printed: hi');
  });

  it('agentEnded turns true at turn.completed / turn.failed (the exit grace starts there)', () => {
    const mapper = new CodexMapper();
    for (const line of started) mapper.push(line);
    expect(mapper.agentEnded).toBe(false);
    mapper.push(ev({ type: 'turn.failed', error: { message: 'x' } }));
    expect(mapper.agentEnded).toBe(true);
  });

  it('after complete() the mapper is spent', () => {
    const mapper = new CodexMapper();
    mapper.push(started[0]!);
    expect(mapper.complete(CLEAN_EXIT).filter(isTerminal)).toHaveLength(1);
    expect(mapper.push(completed)).toEqual([]);
    expect(mapper.complete(CLEAN_EXIT)).toEqual([]);
  });

  it('recorded exits are read as codes or signals', () => {
    expect(recordedExit('sigterm-during-tool')).toMatchObject({ exitCode: null, signal: 'SIGTERM' });
    expect(recordedExit('http500')).toMatchObject({ exitCode: 1, signal: null });
  });
});
