import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { afterAll, describe, it } from 'vitest';
import { deploymentPolicy } from '../../../src/runtime/deployment-policy.ts';
import { Runtime } from '../../../src/runtime/runtime.ts';
import { startFakeGeminiServer, type FakeGeminiServer } from '../../support/fake-gemini-server.ts';
import { useRuntimeSuite } from '../../support/runtime.ts';
import { expectCancelDuringToolEndsOnce } from '../../support/cancel-ends-once.ts';
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
  it('ends the attempt with one terminal.cancelled, the running call closed first, nothing left running', () =>
    expectCancelDuringToolEndsOnce(runtime, { agent: 'gemini', model: MODEL, cwd: env.cwd }));
});
