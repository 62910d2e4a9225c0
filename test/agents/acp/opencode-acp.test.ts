import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runAcp } from '../../../src/agents/acp/provider.ts';
import { findProcessesByMarker } from '../../../src/process/index.ts';
import { startFakeModelServer, type FakeModelServer } from '../../support/fake-model-server.ts';
import { livePidsMatching } from '../../support/processes.ts';
import { expectContract, expectOneResultPerToolCall, failure, terminalOf } from '../contract.ts';
import {
  attemptOf,
  attemptOptions,
  OPENCODE_TITLE_MODEL,
  opencodeEnv,
  textOf,
  waitFor,
  type AcpCliEnv,
} from './acp-clis.ts';

/**
 * The real OpenCode CLI (`opencode acp`, 1.18.33, pinned in agent-clis/) against the fake
 * OpenAI-compatible API on 127.0.0.1, configured as an operator would (see acp-clis.ts).
 * Its 500 retries are its own and cannot be turned off: see acp-clis-runtime.test.ts.
 */
let server: FakeModelServer;
let env: AcpCliEnv;

beforeAll(async () => {
  server = await startFakeModelServer({
    scripts: {
      [OPENCODE_TITLE_MODEL]: { text: 'A title' },
      'oc-tools': ({ body }) =>
        (body.messages ?? []).some((m) => m.role === 'tool')
          ? { text: 'One worked, one failed.' }
          : {
              toolCalls: [
                { name: 'bash', arguments: { command: 'echo hi' } },
                { name: 'bash', arguments: { command: 'echo failing >&2; ls /nonexistent-fake-dir; exit 3' } },
              ],
            },
      'oc-asks': ({ body }) =>
        (body.messages ?? []).some((m) => m.role === 'tool')
          ? { text: 'Done.' }
          : { toolCalls: [{ name: 'bash', arguments: { command: 'touch made-by-opencode' } }] },
    },
  });
  env = opencodeEnv(`${server.url}/v1`, ['text', 'oc-tools', 'oc-asks', 'http401', 'long-tool-setsid']);
});

afterAll(async () => {
  await server?.close();
  env?.cleanup();
});

// An attempt of opencode takes seconds on a quiet machine, far longer on a loaded one: a budget, not a timing assertion.
describe('acp: the real opencode acp on the fake OpenAI-compatible API', { timeout: 240_000 }, () => {
  it('text, then resume in a second turn: exactly the model text, one request per turn, session.resumed, the model sees the first turn, no process left', async () => {
    let marker = '';
    const first = await attemptOf(env, 'text', { prompt: 'First turn' }, { onSpawn: (a) => (marker = a.marker) });
    expectContract(first);
    expect(first[0]?.type).toBe('session.started');
    expect(textOf(first)).toBe('Hello from the fake LLM.');
    expect(terminalOf(first)).toEqual({ type: 'terminal.completed', content: { stopReason: 'end_turn' } });
    expect(server.requestsFor('text')).toHaveLength(1);
    expect(await findProcessesByMarker(marker)).toEqual([]);

    const id = (first[0] as { content: { sessionId: string } }).content.sessionId;
    const second = await attemptOf(env, 'text', { prompt: 'Second turn', session: { mode: 'resume', id } });
    expectContract(second);
    expect(second[0]).toEqual({ type: 'session.resumed', content: { sessionId: id } });
    expect(textOf(second)).toBe('Hello from the fake LLM.');
    expect(server.requestsFor('text')).toHaveLength(2);
    expect(JSON.stringify(server.requestsFor('text')[1]?.body.messages)).toContain('First turn');
  });

  it('two bash tools allowed, one failing: each a tool.call with its command and one tool.completed (OpenCode reports a failing command completed, with its exit code and stderr), then the text', async () => {
    const messages = await attemptOf(env, 'oc-tools', { permissionMode: 'allow' });
    expectContract(messages);
    expectOneResultPerToolCall(messages);
    const commands = (id: string) =>
      messages.filter((m) => (m.type === 'tool.call' || m.type === 'tool.update') && m.content.toolCallId === id).at(-1)
        ?.content;
    const results = messages
      .filter((m) => m.type === 'tool.completed')
      .map((m) => m.content as { toolCallId: string; result: { output: string; metadata: { exit: number } } });
    expect(results).toHaveLength(2);
    const [ok, failed] = results.sort((a, b) => a.result.metadata.exit - b.result.metadata.exit);
    expect(commands(ok?.toolCallId ?? '')).toMatchObject({ name: 'bash', arguments: { command: 'echo hi' } });
    expect(ok?.result).toMatchObject({ output: 'hi\n', metadata: { exit: 0 } });
    expect(failed?.result.metadata.exit).toBe(3);
    expect(failed?.result.output).toContain('nonexistent-fake-dir');
    expect(textOf(messages)).toBe('One worked, one failed.');
    expect(terminalOf(messages).type).toBe('terminal.completed');
  });

  it('with the default permissionMode reject, a command OpenCode asks about does not run', async () => {
    const messages = await attemptOf(env, 'oc-asks');
    expect(messages.find((m) => m.type === 'tool.failed')?.content).toMatchObject({
      error: 'rejected by sessiond (permissionMode reject)',
    });
    expect(terminalOf(messages).type).toBe('terminal.completed');
    expect(() => writeFileSync(join(env.cwd, 'made-by-opencode'), '', { flag: 'wx' })).not.toThrow();
    rmSync(join(env.cwd, 'made-by-opencode'), { force: true });
  });

  it('a 401 from the API: terminal.failed category auth after one request', async () => {
    const content = failure(await attemptOf(env, 'http401'));
    expect(content.category).toBe('auth');
    expect(server.requestsFor('http401')).toHaveLength(1);
  });

  it('cancel during a long bash tool (one child in a new session): rejects with the AbortError and no process is left', async () => {
    const controller = new AbortController();
    let marker = '';
    const sleeps = /^sleep 100[34] $/;
    const run = (async () => {
      for await (const m of runAcp(
        attemptOptions(env, 'long-tool-setsid', { permissionMode: 'allow', cancelGraceMs: 2000 }),
        {
          signal: controller.signal,
          onSpawn: (a) => (marker = a.marker),
        },
      )) {
        if (m.type === 'tool.call' || m.type === 'tool.update') {
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
