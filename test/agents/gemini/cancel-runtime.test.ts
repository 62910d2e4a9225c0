import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { afterAll, describe, expect, it } from 'vitest';
import { deploymentPolicy } from '../../../src/runtime/deployment-policy.ts';
import { Runtime } from '../../../src/runtime/runtime.ts';
import { startFakeGeminiServer, type FakeGeminiServer } from '../../support/fake-gemini-server.ts';
import { agentRecords, turnEnded, until, useRuntimeSuite } from '../../support/runtime.ts';
import { createGeminiEnv, geminiBin, type GeminiEnv } from './gemini-env.ts';

/**
 * Every attempt ends once (issue 28) on the real Gemini CLI in the durable runtime: a cancel while its shell
 * tool runs leaves exactly one terminal message for the attempt, `terminal.cancelled`, and no tool call open.
 */

let server: FakeGeminiServer;
let env: GeminiEnv;
let runtime: Runtime;
const MODEL = 'cancel-tool-runtime';

useRuntimeSuite('gemini-cancel', {}, async (s) => {
  if (!existsSync(geminiBin))
    throw new Error(`${geminiBin} not found: run scripts/install-agent-clis.sh (npm test does)`);
  server = await startFakeGeminiServer();
  server.setScript(MODEL, {
    text: 'Sleeping.',
    functionCalls: [{ name: 'run_shell_command', args: { command: 'sleep 1031; echo done', description: 'Sleep' } }],
  });
  env = createGeminiEnv({ serverUrl: server.url });
  const policy = deploymentPolicy({ workspace: tmpdir() });
  runtime = new Runtime({ connect: s.h.connect, prefix: s.h.prefix, policy });
  const operator = {
    gemini: { configDir: env.configDir, command: geminiBin, env: env.env, approvalMode: 'yolo' },
  };
  await s.h.startWorker({ agentOptions: operator, policy });
});
afterAll(async () => {
  await runtime?.close();
  await server?.close();
  env?.cleanup();
});

describe('gemini: cancel during a tool in the runtime', () => {
  it('ends the attempt with one terminal.cancelled, the running call closed first, nothing left running', async () => {
    const { sessionId } = await runtime.enqueue({
      prompt: 'Run the long command',
      options: { agent: 'gemini', model: MODEL, cwd: env.cwd },
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
