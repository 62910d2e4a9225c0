import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runAcp } from '../../../src/agents/acp/provider.ts';
import { findProcessesByMarker } from '../../../src/process/index.ts';
import { startFakeAnthropicServer, type FakeAnthropicServer } from '../../support/fake-anthropic-server.ts';
import { jsonLines, runCli } from '../../support/cli.ts';
import { livePidsMatching } from '../../support/processes.ts';
import { expectContract, expectOneResultPerToolCall, failure, terminalOf } from '../contract.ts';
import { attemptOf, attemptOptions, claudeAcpEnv, textOf, waitFor, type AcpCliEnv } from './acp-clis.ts';

/**
 * The real Claude Code ACP adapter (`claude-agent-acp` 0.101.0, pinned in agent-clis/) against the
 * fake Anthropic API on 127.0.0.1, configured as an operator would (see acp-clis.ts).
 */
let server: FakeAnthropicServer;
let env: AcpCliEnv;

beforeAll(async () => {
  server = await startFakeAnthropicServer();
  env = claudeAcpEnv(server.url);
});

afterAll(async () => {
  await server?.close();
  env?.cleanup();
});

// Budgets for a loaded host, not timing assertions.
describe('acp: the real claude-agent-acp on the fake Anthropic API', { timeout: 180_000 }, () => {
  it('text: the thinking as assistant.thought, exactly the model text, completed end_turn, no process left', async () => {
    let marker = '';
    const messages = await attemptOf(env, 'text', {}, { onSpawn: (a) => (marker = a.marker) });
    expectContract(messages);
    expect(messages[0]?.type).toBe('session.started');
    expect(textOf(messages, 'assistant.thought')).toContain('The user wants a greeting. I will answer briefly.');
    expect(textOf(messages)).toBe('Hello from the fake model.');
    expect(terminalOf(messages)).toEqual({ type: 'terminal.completed', content: { stopReason: 'end_turn' } });
    expect(await findProcessesByMarker(marker)).toEqual([]);
  });

  it('a Bash tool allowed: tool.call with its command, tool.completed with its output, then the text', async () => {
    const messages = await attemptOf(env, 'tool', { permissionMode: 'allow' });
    expectContract(messages);
    expectOneResultPerToolCall(messages);
    const announced = messages.filter((m) => m.type === 'tool.call' || m.type === 'tool.update');
    expect(announced.at(-1)?.content).toMatchObject({ name: 'Bash', arguments: { command: 'echo hi' } });
    expect(messages.find((m) => m.type === 'tool.completed')?.content).toMatchObject({ result: 'hi' });
    expect(textOf(messages)).toContain('The command printed: hi');
  });

  it('a failing command is tool.failed, and the turn goes on to the model text', async () => {
    const messages = await attemptOf(env, 'tool-fail', { permissionMode: 'allow' });
    expectOneResultPerToolCall(messages);
    expect(JSON.stringify(messages.find((m) => m.type === 'tool.failed')?.content)).toContain('nonexistent-fake-dir');
    expect(textOf(messages)).toContain('The command failed.');
    expect(terminalOf(messages).type).toBe('terminal.completed');
  });

  it('with the default permissionMode reject, a command Claude Code asks about does not run', async () => {
    const messages = await attemptOf(env, 'tool-denied');
    expect(messages.find((m) => m.type === 'tool.failed')?.content).toMatchObject({
      error: 'rejected by sessiond (permissionMode reject)',
    });
    expect(terminalOf(messages).type).toBe('terminal.completed');
    expect(() => writeFileSync(join(env.cwd, 'made-by-tool.txt'), '', { flag: 'wx' })).not.toThrow();
    rmSync(join(env.cwd, 'made-by-tool.txt'), { force: true });
  });

  it('a 401 from the API: terminal.failed category auth after one request', async () => {
    const before = server.requestsFor('http401').length;
    const content = failure(await attemptOf(env, 'http401'));
    expect(content.category).toBe('auth');
    expect(server.requestsFor('http401').length - before).toBe(1);
  });

  it('a 500 from the API: terminal.failed category server_error after one request (Claude Code retries off)', async () => {
    const before = server.requestsFor('http500').length;
    const content = failure(await attemptOf(env, 'http500'));
    expect(content.category).toBe('server_error');
    expect(server.requestsFor('http500').length - before).toBe(1);
  });

  it('resume in a second turn: session.resumed, and the model sees the first turn', async () => {
    const first = await attemptOf(env, 'text-plain', { prompt: 'First turn' });
    const id = (first[0] as { content: { sessionId: string } }).content.sessionId;
    const second = await attemptOf(env, 'text-plain', { prompt: 'Second turn', session: { mode: 'resume', id } });
    expectContract(second);
    expect(second[0]).toEqual({ type: 'session.resumed', content: { sessionId: id } });
    expect(textOf(second)).toBe('Hello from the fake model.');
    // The turn's own request (not the title request, which sees only the new prompt) carries the first turn.
    const sent = server
      .requestsFor('text-plain')
      .map((r) => JSON.stringify(r.body.messages))
      .filter((m) => m.includes('Second turn'));
    expect(sent.some((m) => m.includes('First turn'))).toBe(true);
  });

  it('cancel during a long Bash tool (one child in a new session): rejects with the AbortError and no process is left', async () => {
    const controller = new AbortController();
    let marker = '';
    const timers = /setTimeout\(\(\) => \{\}, 106[23]e3\)/;
    const run = (async () => {
      for await (const m of runAcp(
        attemptOptions(env, 'long-tool-bg', { permissionMode: 'allow', cancelGraceMs: 2000 }),
        {
          signal: controller.signal,
          onSpawn: (a) => (marker = a.marker),
        },
      )) {
        if (m.type === 'tool.call') {
          await waitFor(() => livePidsMatching(timers).length >= 2, 'both node timers to start');
          controller.abort();
        }
      }
    })();
    await expect(run).rejects.toMatchObject({ name: 'AbortError' });
    expect(await findProcessesByMarker(marker)).toEqual([]);
    expect(livePidsMatching(timers)).toEqual([]);
  });

  it('sessiond run --agent acp:claude runs one attempt of the configured agent; an acp:<name> this host does not configure is a usage error', async () => {
    const agents = JSON.stringify({ 'acp:claude': env.agent('text-plain') });
    const base = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: env.root,
      SESSIOND_STATE_DIR: join(env.root, 'state'),
      SESSIOND_AGENT_OPTIONS: agents,
    };
    const ran = await runCli(['run', '--agent', 'acp:claude', '--cwd', env.cwd, '--json', 'Say hello'], { env: base });
    expect(ran.exitCode, ran.stderr).toBe(0);
    const messages = jsonLines(ran.stdout);
    expect(messages.map((m) => (m.type === 'assistant' ? m.content.text : '')).join('')).toBe(
      'Hello from the fake model.',
    );
    expect(messages.at(-1)).toEqual({ type: 'terminal.completed', content: { stopReason: 'end_turn' } });
    const missing = await runCli(['run', '--agent', 'acp:nope', 'Say hello'], { env: base });
    expect(missing.exitCode).toBe(2);
    expect(missing.stderr).toContain('--agent acp:nope: no ACP agent of that name is configured on this host');
  });
});
