import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { runAcp } from '../../../src/agents/acp/provider.ts';
import type { AcpOptionsInput } from '../../../src/agents/acp/options.ts';
import { findProcessesByMarker } from '../../../src/process/index.ts';
import type { CliMessage } from '../../../src/index.ts';
import type { RunContext } from '../../../src/agents/shared/run-attempt.ts';
import { expectContract, expectOneResultPerToolCall, failure, terminalOf } from '../contract.ts';
import { livePids, livePidsMatching } from '../../support/processes.ts';

const FAKE = fileURLToPath(new URL('../../fixtures/acp/fake-acp-agent.mjs', import.meta.url));
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function stateDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'sessiond-acp-'));
  dirs.push(dir);
  return dir;
}

let state = stateDir();
afterEach(() => {
  state = stateDir();
});

function options(
  prompt: string,
  extra: Partial<AcpOptionsInput> = {},
  env: Record<string, string> = {},
): AcpOptionsInput {
  return {
    command: process.execPath,
    args: [FAKE],
    prompt,
    cwd: state,
    env: { FAKE_ACP_STATE_DIR: state, ...env },
    ...extra,
  };
}

async function attempt(input: AcpOptionsInput, context: RunContext = {}): Promise<CliMessage[]> {
  const out: CliMessage[] = [];
  for await (const message of runAcp(input, context)) out.push(message);
  return out;
}

function texts(messages: CliMessage[], type: 'assistant' | 'assistant.thought' = 'assistant'): string {
  return messages.map((m) => (m.type === type ? m.content.text : '')).join('');
}

function sessionIdOf(messages: CliMessage[]): string {
  const first = messages[0];
  if (first?.type !== 'session.started' && first?.type !== 'session.resumed')
    throw new Error(`no session message first: ${JSON.stringify(first)}`);
  return first.content.sessionId;
}

async function waitFor(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('ACP agent (on a fake ACP agent built on the SDK agent side)', () => {
  it('text: session.started, the thought and exactly the agent text, completed end_turn, and the agent exits', async () => {
    let marker = '';
    const messages = await attempt(options('say hello there'), { onSpawn: (a) => (marker = a.marker) });
    expectContract(messages);
    expect(messages[0]?.type).toBe('session.started');
    expect(texts(messages)).toBe('hello there');
    expect(texts(messages, 'assistant.thought')).toBe('thinking about it');
    expect(terminalOf(messages)).toEqual({ type: 'terminal.completed', content: { stopReason: 'end_turn' } });
    expect(await findProcessesByMarker(marker)).toEqual([]);
  });

  it('a tool call: tool.call with the raw input, tool.completed with the raw output, then the text', async () => {
    const messages = await attempt(options('tool'));
    expectContract(messages);
    expectOneResultPerToolCall(messages);
    expect(messages.find((m) => m.type === 'tool.call')).toEqual({
      type: 'tool.call',
      content: { toolCallId: 'call-1', name: 'Read notes.txt', arguments: { path: 'notes.txt' } },
    });
    expect(messages.find((m) => m.type === 'tool.completed')).toEqual({
      type: 'tool.completed',
      content: { toolCallId: 'call-1', name: 'Read notes.txt', result: { content: 'hello notes' } },
    });
    expect(texts(messages)).toBe('done');
  });

  it('a failing tool: tool.failed with its content text, and the turn goes on to completion', async () => {
    const messages = await attempt(options('failing tool'));
    expectOneResultPerToolCall(messages);
    expect(messages.find((m) => m.type === 'tool.failed')).toEqual({
      type: 'tool.failed',
      content: { toolCallId: 'call-1', name: 'Read notes.txt', error: 'ENOENT: notes.txt' },
    });
    expect(texts(messages)).toBe('recovered');
    expect(terminalOf(messages).type).toBe('terminal.completed');
  });

  it('a plan is shown as a thought listing its entries', async () => {
    const messages = await attempt(options('plan'));
    expect(texts(messages, 'assistant.thought')).toBe('Plan:\n[completed] read the code\n[pending] fix the bug');
    expect(texts(messages)).toBe('planned');
  });

  it.each([
    ['auth error', 'auth'],
    ['http 401', 'auth'],
    ['http 429', 'rate_limited'],
    ['http 500', 'server_error'],
  ] as const)(
    'an error answer to the prompt (%s) fails with category %s and the agent error',
    async (prompt, category) => {
      const messages = await attempt(options(prompt));
      expectContract(messages);
      const content = failure(messages);
      expect(content.category).toBe(category);
      expect(content.text).toContain('session/prompt');
      expect(content.agentError).toBeDefined();
    },
  );

  it('an agent that exits mid-prompt: what it said stays, then process_crash with its exit code', async () => {
    const messages = await attempt(options('crash'));
    expectContract(messages);
    expect(texts(messages)).toBe('partial');
    const content = failure(messages);
    expect(content.category).toBe('process_crash');
    expect(content.exitCode).toBe(3);
  });

  it('a line that is not JSON-RPC is reported with the terminal, and the turn still completes', async () => {
    const messages = await attempt(options('garbage'));
    const terminal = terminalOf(messages);
    expect(terminal.type).toBe('terminal.completed');
    if (terminal.type !== 'terminal.completed') return;
    expect(terminal.content.invalid_output_lines).toEqual(['line 3: not a JSON-RPC message: this is not json']);
    expect(texts(messages)).toBe('ok');
  });

  it('a command that does not exist is a startup failure naming it', async () => {
    const content = failure(await attempt({ ...options('say hi'), command: '/nonexistent/acp-agent' }));
    expect(content.category).toBe('startup');
    expect(content.text).toContain('/nonexistent/acp-agent');
  });

  it('no command configured for the agent is a startup failure that says where to configure it', async () => {
    const { command: _none, ...rest } = options('say hi');
    const content = failure(await attempt(rest as AcpOptionsInput));
    expect(content.category).toBe('startup');
    expect(content.text).toContain('command');
    expect(content.text).toContain('agents."acp:<name>".command');
  });

  it('the agent sees only the base environment and its configured env, no SESSIOND_* and no worker secret', async () => {
    process.env.SESSIOND_ACP_TEST_SECRET = 'planted';
    process.env.SOME_WORKER_TOKEN = 'planted';
    try {
      const names = texts(await attempt(options('env', {}, { MY_ACP_KEY: 'k' }))).split(',');
      expect(names).toContain('MY_ACP_KEY');
      expect(names).toContain('PATH');
      expect(names).not.toContain('SESSIOND_ACP_TEST_SECRET');
      expect(names).not.toContain('SOME_WORKER_TOKEN');
      expect(names.filter((n) => n.startsWith('SESSIOND_') && n !== 'SESSIOND_AGENT_MARKER')).toEqual([]);
    } finally {
      delete process.env.SESSIOND_ACP_TEST_SECRET;
      delete process.env.SOME_WORKER_TOKEN;
    }
  });

  it.each([
    ['reject', 'permission: no'],
    ['allow', 'permission: yes'],
  ] as const)(
    'a permission request is answered by permissionMode %s (allow_once, never allow_always)',
    async (permissionMode, said) => {
      const messages = await attempt(options('ask', { permissionMode }));
      expect(texts(messages)).toBe(said);
      expect(
        messages.some((m) => (permissionMode === 'allow' ? m.type === 'tool.completed' : m.type === 'tool.failed')),
      ).toBe(true);
    },
  );

  it('permissionMode ask outside the durable runtime (no approval gate, e.g. sessiond run): nobody to ask, so rejected, saying why', async () => {
    const messages = await attempt(options('ask', { permissionMode: 'ask' }));
    expect(texts(messages)).toBe('permission: no');
    expect(messages.find((m) => m.type === 'tool.failed')?.content).toMatchObject({
      error: expect.stringContaining('nobody to ask'),
    });
  });

  it("permissionMode ask with a gate: the gate decides, the agent gets its answer, and the gate's messages are in the stream in order", async () => {
    const asked: unknown[] = [];
    const gate = {
      ask: async (
        request: { toolCallId: string; tool: string; kind?: string; arguments: unknown },
        emit: (m: CliMessage) => void,
      ) => {
        asked.push(request);
        emit({ type: 'assistant.thought', content: { text: 'gate asked' } });
        return { optionId: 'yes', outcome: 'allowed' as const };
      },
    };
    const messages = await attempt(options('ask', { permissionMode: 'ask' }), { approvals: gate });
    expect(asked).toEqual([
      expect.objectContaining({
        toolCallId: 'call-sh',
        tool: 'rm -rf build',
        kind: 'execute',
        arguments: { command: 'rm -rf build' },
      }),
    ]);
    expect(texts(messages)).toBe('permission: yes');
    const types = messages.map((m) => m.type);
    expect(types.indexOf('assistant.thought')).toBeLessThan(types.indexOf('tool.completed'));
  });

  it('resume in a second turn: session/load, session.resumed, the replayed history is not repeated, the agent has the first turn', async () => {
    const id = sessionIdOf(await attempt(options('say first turn')));
    const second = await attempt(options('recall', { session: { mode: 'resume', id } }));
    expectContract(second);
    expect(second[0]).toEqual({ type: 'session.resumed', content: { sessionId: id } });
    expect(texts(second)).toBe('say first turn');
    expect(JSON.stringify(second)).not.toContain('REPLAYED');
  });

  it('an agent whose replay follows its session/load answer (as gemini 0.61): the replay is still not this turn’s output', async () => {
    const env = { FAKE_ACP_LATE_REPLAY: '1' };
    const id = sessionIdOf(await attempt(options('say first turn', {}, env)));
    const second = await attempt(options('say second turn', { session: { mode: 'resume', id } }, env));
    expect(second[0]).toEqual({ type: 'session.resumed', content: { sessionId: id } });
    expect(texts(second)).toBe('second turn');
    expect(JSON.stringify(second)).not.toContain('REPLAYED');
  });

  it('resume with session/resume when the agent offers it: session.resumed without replay', async () => {
    const env = { FAKE_ACP_RESUME: '1' };
    const id = sessionIdOf(await attempt(options('say one', {}, env)));
    const second = await attempt(options('recall', { session: { mode: 'resume', id } }, env));
    expect(second[0]).toEqual({ type: 'session.resumed', content: { sessionId: id } });
    expect(texts(second)).toBe('say one');
  });

  it('an agent that can neither load nor resume: the turn runs in a new session, said by session.started with a new id', async () => {
    const env = { FAKE_ACP_NO_LOAD: '1' };
    const id = sessionIdOf(await attempt(options('say one', {}, env)));
    const second = await attempt(options('recall', { session: { mode: 'resume', id } }, env));
    expect(second[0]?.type).toBe('session.started');
    expect(sessionIdOf(second)).not.toBe(id);
    expect(texts(second)).toBe('');
  });

  it('resuming a session the agent cannot load: the turn runs in a new session, said by session.started with a new id', async () => {
    const messages = await attempt(options('recall', { session: { mode: 'resume', id: 'no-such-session' } }));
    expectContract(messages);
    expect(messages[0]?.type).toBe('session.started');
    expect(sessionIdOf(messages)).not.toBe('no-such-session');
    expect(terminalOf(messages).type).toBe('terminal.completed');
  });

  it('an internal error whose data says nothing known is unknown, not a server error', async () => {
    const content = failure(await attempt(options('http teapot')));
    expect(content.category).toBe('unknown');
  });

  it.each([
    ['long', 'honours session/cancel'],
    ['stubborn', 'ignores session/cancel (its tool in its own session)'],
  ] as const)(
    'cancel during a long tool, an agent that %s: rejects with the AbortError, no process left',
    async (prompt, _how) => {
      const pidFile = join(state, 'pids');
      const controller = new AbortController();
      let marker = '';
      const seen: CliMessage[] = [];
      const run = (async () => {
        for await (const m of runAcp(options(prompt, { cancelGraceMs: 1000 }, { FAKE_ACP_PID_FILE: pidFile }), {
          signal: controller.signal,
          onSpawn: (a) => (marker = a.marker),
        })) {
          seen.push(m);
          if (m.type === 'tool.call') {
            await waitFor(() => {
              try {
                return readFileSync(pidFile, 'utf8').trim() !== '';
              } catch {
                return false;
              }
            }, 'the tool process');
            controller.abort();
          }
        }
      })();
      await expect(run).rejects.toMatchObject({ name: 'AbortError' });
      // ACP's cancel went first, for the session of this attempt.
      expect(readFileSync(join(state, 'cancels'), 'utf8').trim()).toBe(sessionIdOf(seen));
      const pids = readFileSync(pidFile, 'utf8').trim().split('\n').map(Number);
      expect(seen.some((m) => m.type === 'tool.call')).toBe(true);
      expect(seen.some((m) => m.type === 'terminal.completed' || m.type === 'terminal.failed')).toBe(false);
      expect(await findProcessesByMarker(marker)).toEqual([]);
      expect(await livePids(pids)).toEqual([]);
      expect(livePidsMatching(new RegExp(FAKE.replaceAll('.', '\\.'))).length).toBe(0);
    },
  );

  it('a consumer that stops reading at a tool boundary (the steer fallback): session/cancel first, the agent records its turn, no process left', async () => {
    let marker = '';
    const seen: CliMessage[] = [];
    for await (const m of runAcp(options('tool then wait', { cancelGraceMs: 10_000 }), {
      onSpawn: (a) => (marker = a.marker),
    })) {
      seen.push(m);
      if (m.type === 'tool.completed') break;
    }
    const sessionId = sessionIdOf(seen);
    expect(readFileSync(join(state, 'cancels'), 'utf8').trim()).toBe(sessionId);
    // Stopped only once it had recorded its turn, which a resumed session goes on from.
    expect(readFileSync(join(state, 'recorded'), 'utf8').trim()).toBe(sessionId);
    expect(await findProcessesByMarker(marker)).toEqual([]);
  });

  it('an already-aborted signal rejects at once and starts nothing', async () => {
    const controller = new AbortController();
    controller.abort();
    await expect(runAcp(options('say hi'), { signal: controller.signal }).next()).rejects.toMatchObject({
      name: 'AbortError',
    });
  });
});
