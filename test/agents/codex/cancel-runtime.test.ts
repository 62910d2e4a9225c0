import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { afterAll, describe, it } from 'vitest';
import { deploymentPolicy } from '../../../src/runtime/deployment-policy.ts';
import { Runtime } from '../../../src/runtime/runtime.ts';
import {
  hasFunctionCallOutput,
  startFakeResponsesServer,
  type FakeResponsesServer,
} from '../../support/fake-responses-server.ts';
import { useRuntimeSuite } from '../../support/runtime.ts';
import { expectCancelDuringToolEndsOnce } from '../../support/cancel-ends-once.ts';
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
  it('ends the attempt with one terminal.cancelled, the running call closed first, nothing left running', () =>
    expectCancelDuringToolEndsOnce(runtime, { agent: 'codex', model: FAKE_MODEL, cwd: env.cwd }));
});
