import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { afterAll, describe, expect, it } from 'vitest';
import { deploymentPolicy } from '../../../src/runtime/deployment-policy.ts';
import { Runtime } from '../../../src/runtime/runtime.ts';
import {
  hasFunctionCallOutput,
  startFakeResponsesServer,
  type FakeResponsesServer,
} from '../../support/fake-responses-server.ts';
import { agentRecords, turnEnded, until, useRuntimeSuite } from '../../support/runtime.ts';
import { codexBin, createCodexEnv, FAKE_KEY_ENV, FAKE_MODEL, type CodexEnv } from './codex-env.ts';

/**
 * Every attempt ends once (issue 28) on the real Codex CLI in the durable runtime: a cancel while its
 * exec_command tool runs leaves exactly one terminal message for the attempt, `terminal.cancelled`, and no
 * tool call open.
 */

let server: FakeResponsesServer;
let env: CodexEnv;
let runtime: Runtime;
// A sleep length unique to this run: the orphan check must not see another run's.
const SECONDS = 3000 + Math.floor(Math.random() * 6000);
const SCRIPT = `long-tool-${SECONDS}`;

useRuntimeSuite('codex-cancel', {}, async (s) => {
  if (!existsSync(codexBin))
    throw new Error(`${codexBin} not found: run scripts/install-agent-clis.sh (npm test does)`);
  server = await startFakeResponsesServer();
  server.setScript(SCRIPT, ({ body }) =>
    hasFunctionCallOutput(body)
      ? { text: 'Slept.' }
      : { functionCalls: [{ name: 'exec_command', arguments: { cmd: `sleep ${SECONDS}; echo done` } }] },
  );
  env = createCodexEnv();
  const policy = deploymentPolicy({ workspace: tmpdir() });
  runtime = new Runtime({ connect: s.h.connect, prefix: s.h.prefix, policy });
  const operator = {
    codex: {
      baseUrl: server.urlFor(SCRIPT),
      envKey: FAKE_KEY_ENV,
      command: codexBin,
      codexHome: env.userCodexHome,
      env: env.env,
    },
  };
  await s.h.startWorker({ agentOptions: operator, policy });
});
afterAll(async () => {
  await runtime?.close();
  await server?.close();
  env?.cleanup();
});

describe('codex: cancel during a tool in the runtime', () => {
  it('ends the attempt with one terminal.cancelled, the running call closed first, nothing left running', async () => {
    const { sessionId } = await runtime.enqueue({
      prompt: 'Run the long command',
      options: { agent: 'codex', model: FAKE_MODEL, cwd: env.cwd },
    });
    await until(
      async () => (await runtime.readMessages(sessionId)).some((m) => m.type === 'tool.call'),
      60_000,
      'the tool call',
    );
    await runtime.cancel(sessionId, 'stop the tool');
    const ended = await turnEnded(runtime, sessionId, 1, 60_000);
    expect(ended.state).toBe('cancelled');
    const log = await runtime.readMessages(sessionId);
    const terminals = log.filter((m) => m.type.startsWith('terminal.'));
    expect(terminals.map((m) => [m.attempt, m.type, m.content])).toEqual([
      [1, 'terminal.cancelled', { reason: 'stop the tool' }],
    ]);
    expect(log.at(-1)?.type).toBe('terminal.cancelled');
    const ids = (type: string) =>
      log.filter((m) => m.type === type).map((m) => (m.content as { toolCallId: string }).toolCallId);
    const calls = ids('tool.call');
    expect(calls.length).toBeGreaterThan(0);
    expect([...ids('tool.completed'), ...ids('tool.failed')].sort()).toEqual([...calls].sort());
    expect(log.filter((m) => m.type === 'tool.failed').at(-1)?.content).toMatchObject({
      error: 'the attempt was cancelled',
    });
    expect(await agentRecords(sessionId)).toEqual([]);
  });
});
