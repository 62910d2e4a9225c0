import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AcpOptionsInput } from '../../../src/agents/acp/options.ts';
import { runAcp } from '../../../src/agents/acp/provider.ts';
import type { RunContext } from '../../../src/agents/shared/run-attempt.ts';
import { findProcessesByMarker } from '../../../src/process/index.ts';
import type { CliMessage } from '../../../src/index.ts';
import { startFakeModelServer, type FakeModelServer } from '../../support/fake-model-server.ts';
import { livePidsMatching } from '../../support/processes.ts';
import { expectContract, expectOneResultPerToolCall, failure, terminalOf } from '../contract.ts';
import { REPO_ROOT } from '../gemini/gemini-env.ts';

/**
 * The real Qwen Code CLI (0.24.4, pinned in agent-clis/) as an ACP agent (`qwen --acp`), against
 * the fake OpenAI-compatible API on 127.0.0.1: what the operator would configure as
 * `agents."acp:qwen"` (its key and base URL in the agent's env, its HOME with ~/.qwen/settings.json).
 */
const qwenBin = join(REPO_ROOT, 'agent-clis', 'node_modules', '.bin', 'qwen');
let server: FakeModelServer;
let root: string;
let home: string;
let cwd: string;

const shell = (command: string) => ({ name: 'run_shell_command', arguments: { command } });
const toolResultSeen = (body: { messages?: Array<{ role?: string }> }) => (body.messages ?? []).some((m) => m.role === 'tool');

beforeAll(async () => {
  server = await startFakeModelServer();
  server.setScript('q-tool', ({ body }) => (toolResultSeen(body) ? { text: 'The command printed: hi' } : { toolCalls: [shell('echo hi')] }));
  server.setScript('q-tool-fail', ({ body }) => (toolResultSeen(body) ? { text: 'The command failed.' } : { toolCalls: [shell('ls /nonexistent-fake-dir')] }));
  server.setScript('q-tool-asks', ({ body }) => (toolResultSeen(body) ? { text: 'Done.' } : { toolCalls: [shell('touch made-by-qwen')] }));
  server.setScript('q-long', ({ body }) => (toolResultSeen(body) ? { text: 'Slept.' } : { toolCalls: [shell('setsid sleep 1031 & sleep 1032')] }));
  root = mkdtempSync(join(tmpdir(), 'sessiond-qwen-'));
  home = join(root, 'home');
  cwd = join(root, 'work');
  mkdirSync(join(home, '.qwen'), { recursive: true });
  mkdirSync(cwd);
  writeFileSync(join(home, '.qwen', 'settings.json'), JSON.stringify({ model: { generationConfig: { maxRetries: 0 } } }));
});

afterAll(async () => {
  await server?.close();
  if (root !== undefined) rmSync(root, { recursive: true, force: true });
});

function options(model: string, extra: Partial<AcpOptionsInput> = {}): AcpOptionsInput {
  return {
    command: qwenBin,
    args: ['--acp', '--auth-type', 'openai', '--model', model],
    prompt: 'Say hello',
    cwd,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, OPENAI_API_KEY: 'fake-openai-key-not-secret', OPENAI_BASE_URL: `${server.url}/v1` },
    idleTimeoutMs: 60_000,
    ...extra,
  };
}

async function attempt(model: string, extra: Partial<AcpOptionsInput> = {}, context: RunContext = {}): Promise<CliMessage[]> {
  const out: CliMessage[] = [];
  for await (const message of runAcp(options(model, extra), context)) out.push(message);
  return out;
}

const text = (messages: CliMessage[], type: 'assistant' | 'assistant.thought' = 'assistant') => messages.map((m) => (m.type === type ? m.content.text : '')).join('');

async function waitFor(check: () => boolean, what: string, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('acp: the real qwen --acp on the fake OpenAI-compatible API', () => {
  it('text: exactly the model text, completed end_turn, no process left', async () => {
    let marker = '';
    const messages = await attempt('text', {}, { onSpawn: (a) => (marker = a.marker) });
    expectContract(messages);
    expect(messages[0]?.type).toBe('session.started');
    expect(text(messages)).toBe('Hello from the fake LLM.');
    expect(terminalOf(messages)).toEqual({ type: 'terminal.completed', content: { stopReason: 'end_turn' } });
    expect(await findProcessesByMarker(marker)).toEqual([]);
  });

  it('reasoning arrives as assistant.thought', async () => {
    const messages = await attempt('thinking');
    expect(text(messages, 'assistant.thought')).toBe('Let me think about it.');
    expect(text(messages)).toBe('Hello there.');
  });

  it('a shell tool: tool.call (its arguments completed by tool.update), tool.completed with its output, then the text', async () => {
    const messages = await attempt('q-tool', { permissionMode: 'allow' });
    expectContract(messages);
    expectOneResultPerToolCall(messages);
    const announced = messages.filter((m) => m.type === 'tool.call' || m.type === 'tool.update');
    expect(announced.at(-1)?.content).toMatchObject({ arguments: { command: 'echo hi' } });
    expect(messages.find((m) => m.type === 'tool.completed')?.content).toMatchObject({ result: { output: 'hi', exitCode: 0 } });
    expect(text(messages)).toBe('The command printed: hi');
  });

  it('a failing shell command is tool.failed with its output and exit code, and the turn goes on', async () => {
    const messages = await attempt('q-tool-fail', { permissionMode: 'allow' });
    expectOneResultPerToolCall(messages);
    expect(messages.find((m) => m.type === 'tool.failed')?.content).toMatchObject({ error: { exitCode: 2 } });
    expect(text(messages)).toBe('The command failed.');
    expect(terminalOf(messages).type).toBe('terminal.completed');
  });

  it('with the default permissionMode reject a command qwen asks about does not run', async () => {
    const messages = await attempt('q-tool-asks');
    expect(messages.find((m) => m.type === 'tool.failed')).toBeDefined();
    expect(terminalOf(messages).type).toBe('terminal.completed');
    expect(() => writeFileSync(join(cwd, 'made-by-qwen'), '', { flag: 'wx' })).not.toThrow();
    rmSync(join(cwd, 'made-by-qwen'), { force: true });
  });

  it('a 401 from the API: terminal.failed category auth after one request', async () => {
    const before = server.requestsFor('http401').length;
    const content = failure(await attempt('http401'));
    expect(content.category).toBe('auth');
    expect(server.requestsFor('http401').length - before).toBe(1);
  });

  it('resume in a second turn: session.resumed, and the model sees the first turn', async () => {
    const first = await attempt('text', { prompt: 'First turn' });
    const id = (first[0] as { content: { sessionId: string } }).content.sessionId;
    const second = await attempt('text', { prompt: 'Second turn', session: { mode: 'resume', id } });
    expectContract(second);
    expect(second[0]).toEqual({ type: 'session.resumed', content: { sessionId: id } });
    expect(text(second)).toBe('Hello from the fake LLM.');
    const sent = JSON.stringify(
      server
        .requestsFor('text')
        .filter((r) => JSON.stringify(r.body).includes('Second turn'))
        .at(0)?.body,
    );
    expect(sent).toContain('First turn');
  });

  it('cancel during a long shell tool: rejects with the AbortError and no process is left', async () => {
    const controller = new AbortController();
    let marker = '';
    const sleeps = /^sleep 103[12] $/;
    const run = (async () => {
      for await (const m of runAcp(options('q-long', { permissionMode: 'allow', cancelGraceMs: 2000 }), { signal: controller.signal, onSpawn: (a) => (marker = a.marker) })) {
        if (m.type === 'tool.call') {
          await waitFor(() => livePidsMatching(sleeps).length === 2, 'both sleeps to start');
          controller.abort();
        }
      }
    })();
    await expect(run).rejects.toMatchObject({ name: 'AbortError' });
    expect(await findProcessesByMarker(marker)).toEqual([]);
    expect(livePidsMatching(sleeps)).toEqual([]);
  });
});
