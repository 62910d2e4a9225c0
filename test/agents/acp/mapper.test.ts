import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { AcpLineMapper, AcpUpdates } from '../../../src/agents/acp/mapper.ts';
import type { CliMessage } from '../../../src/index.ts';
import { expectContract, expectOneResultPerToolCall, failure, terminalOf } from '../contract.ts';

/** Recordings of real `gemini --acp` (0.61.0), `qwen --acp` (0.24.4), `opencode acp` (1.18.33) and `claude-agent-acp` (0.101.0), see record-acp-transcripts.ts, read back. */
function replay(name: string, resumeSessionId?: string): CliMessage[] {
  const text = readFileSync(fileURLToPath(new URL(`../../fixtures/acp/${name}.stdout.jsonl`, import.meta.url)), 'utf8');
  const mapper = new AcpLineMapper(resumeSessionId === undefined ? {} : { resumeSessionId });
  const out: CliMessage[] = [];
  for (const line of text.split('\n')) out.push(...mapper.push(line));
  out.push(...mapper.complete({ exitCode: 0, signal: null, stopReason: null, stderrTail: '' }));
  return out;
}

const said = (messages: CliMessage[], type: 'assistant' | 'assistant.thought' = 'assistant') =>
  messages.map((m) => (m.type === type ? m.content.text : '')).join('');

describe('ACP recordings read back (sessiond normalize --agent acp:<name>)', () => {
  it.each(['gemini-text', 'qwen-text', 'opencode-text', 'claude-text'])(
    '%s: session.started, exactly the model text, completed end_turn',
    (name) => {
      const messages = replay(name);
      expectContract(messages);
      expect(messages[0]?.type).toBe('session.started');
      expect(said(messages)).toMatch(/^Hello from the fake (model|LLM)\.$/);
      expect(terminalOf(messages)).toEqual({ type: 'terminal.completed', content: { stopReason: 'end_turn' } });
    },
  );

  it('gemini-thinking: the thought chunks, then the text', () => {
    const messages = replay('gemini-thinking');
    expect(said(messages, 'assistant.thought')).toContain('think about it.');
    expect(said(messages)).toBe('Hello there.');
  });

  it('gemini-tool: the update of a tool gemini never announced is its tool.call, then one result', () => {
    const messages = replay('gemini-tool');
    expectContract(messages);
    expectOneResultPerToolCall(messages);
    expect(messages.find((m) => m.type === 'tool.call')?.content).toMatchObject({ arguments: { kind: 'execute' } });
  });

  it('qwen-tool: tool.call, its arguments, tool.completed with the shell result', () => {
    const messages = replay('qwen-tool');
    expectContract(messages);
    expectOneResultPerToolCall(messages);
    expect(messages.find((m) => m.type === 'tool.completed')?.content).toMatchObject({ result: { output: 'hi' } });
  });

  it.each(['opencode-tool', 'claude-tool'])(
    '%s: tool.call with the command, one tool.completed with its output, then the text',
    (name) => {
      const messages = replay(name);
      expectContract(messages);
      expectOneResultPerToolCall(messages);
      const announced = messages.filter((m) => m.type === 'tool.call' || m.type === 'tool.update');
      expect(announced.at(-1)?.content).toMatchObject({ arguments: { command: 'echo hi' } });
      expect(JSON.stringify(messages.find((m) => m.type === 'tool.completed')?.content)).toContain('hi');
      // Claude's scripted turn says 'I will run a command.' before the tool.
      expect(said(messages)).toMatch(/^(I will run a command\.)?The command printed: hi$/);
    },
  );

  it('claude-text: the thinking as assistant.thought', () => {
    expect(said(replay('claude-text'), 'assistant.thought')).toBe('The user wants a greeting. I will answer briefly.');
  });

  it('a notice (sessiond advertises session.notices) is an assistant.thought, never assistant text', () => {
    const updates = new AcpUpdates();
    expect(
      updates.update({
        sessionUpdate: 'notice',
        severity: 'warning',
        title: 'Auto mode unavailable',
        description: 'Using Accept edits instead.',
      }),
    ).toEqual([
      {
        type: 'assistant.thought',
        content: { text: 'Notice (warning): Auto mode unavailable — Using Accept edits instead.' },
      },
    ]);
    expect(updates.update({ sessionUpdate: 'notice', severity: 'info', title: 'Compacted' })).toEqual([
      { type: 'assistant.thought', content: { text: 'Notice (info): Compacted' } },
    ]);
  });

  it.each([
    ['gemini-http401', 'auth'],
    ['gemini-http500', 'server_error'],
    ['opencode-http401', 'auth'],
    ['claude-http500', 'server_error'],
  ] as const)('%s: the error answer is terminal.failed with category %s', (name, category) => {
    expect(failure(replay(name)).category).toBe(category);
  });

  it('the session asked for is session.resumed', () => {
    const id = (replay('gemini-text')[0] as { content: { sessionId: string } }).content.sessionId;
    expect(replay('gemini-text', id)[0]).toEqual({ type: 'session.resumed', content: { sessionId: id } });
  });

  it('a stream that ends without a prompt answer fails as process_crash, open tools failed first', () => {
    const mapper = new AcpLineMapper();
    mapper.push(
      JSON.stringify({
        jsonrpc: '2.0',
        method: 'session/update',
        params: {
          sessionId: 's',
          update: { sessionUpdate: 'tool_call', toolCallId: 't', title: 'x', status: 'in_progress' },
        },
      }),
    );
    mapper.push('not json');
    const end = mapper.complete({ exitCode: 0, signal: null, stopReason: null, stderrTail: '' });
    expect(end.map((m) => m.type)).toEqual(['tool.failed', 'terminal.failed']);
    expect(failure(end).category).toBe('process_crash');
    expect(failure(end).invalid_output_lines).toEqual(['line 2: not a JSON-RPC message: not json']);
  });

  it('one tool.call per id however often the agent repeats it; a completed status once, later updates ignored', () => {
    const updates = new AcpUpdates();
    const out = [
      ...updates.update({ sessionUpdate: 'tool_call', toolCallId: 'a', title: 'Read', rawInput: { path: 'x' } }),
      ...updates.update({ sessionUpdate: 'tool_call_update', toolCallId: 'a', status: 'in_progress' }),
      ...updates.update({ sessionUpdate: 'tool_call_update', toolCallId: 'a', status: 'completed', rawOutput: 'ok' }),
      ...updates.update({ sessionUpdate: 'tool_call_update', toolCallId: 'a', status: 'failed' }),
    ];
    expect(out).toEqual([
      { type: 'tool.call', content: { toolCallId: 'a', name: 'Read', arguments: { path: 'x' } } },
      { type: 'tool.completed', content: { toolCallId: 'a', name: 'Read', result: 'ok' } },
    ]);
  });
});

describe('sessiond normalize --agent acp', () => {
  it('reads a recording of qwen --acp into the messages, one per line', async () => {
    const { runCli } = await import('../../support/cli.ts');
    const file = fileURLToPath(new URL('../../fixtures/acp/qwen-tool.stdout.jsonl', import.meta.url));
    const result = await runCli(['normalize', '--agent', 'acp', file], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
    });
    expect(result.exitCode, result.stderr).toBe(0);
    const messages = result.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as CliMessage);
    expect(messages).toEqual(replay('qwen-tool'));
  });
});
