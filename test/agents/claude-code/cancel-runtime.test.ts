import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { afterAll, describe, it } from 'vitest';
import { deploymentPolicy } from '../../../src/runtime/deployment-policy.ts';
import { Runtime } from '../../../src/runtime/runtime.ts';
import { claudeBin, createClaudeEnv, type ClaudeEnv } from '../../support/claude-code-env.ts';
import { startFakeAnthropicServer, type FakeAnthropicServer } from '../../support/fake-anthropic-server.ts';
import { useRuntimeSuite } from '../../support/runtime.ts';
import { expectCancelDuringToolEndsOnce } from '../../support/cancel-ends-once.ts';

/**
 * Every attempt ends once (issue 28) on the real Claude Code in the durable runtime: a cancel while its Bash
 * tool runs leaves exactly one terminal message for the attempt, `terminal.cancelled`, and no tool call open.
 */

let server: FakeAnthropicServer;
let env: ClaudeEnv;
let runtime: Runtime;

useRuntimeSuite('claude-code-cancel', {}, async (s) => {
  if (!existsSync(claudeBin))
    throw new Error(`${claudeBin} not found: run scripts/install-agent-clis.sh (npm test does)`);
  server = await startFakeAnthropicServer();
  env = createClaudeEnv(server.url);
  const policy = deploymentPolicy({ workspace: tmpdir() });
  runtime = new Runtime({ connect: s.h.connect, prefix: s.h.prefix, policy });
  await s.h.startWorker({ agentOptions: { 'claude-code': { ...env.options, allowedTools: ['Bash'] } }, policy });
});
afterAll(async () => {
  await runtime?.close();
  await server?.close();
  env?.cleanup();
});

describe('claude-code: cancel during a tool in the runtime', () => {
  it('ends the attempt with one terminal.cancelled, the running Bash call closed first, nothing left running', () =>
    expectCancelDuringToolEndsOnce(runtime, { agent: 'claude-code', model: 'long-tool-bg', cwd: env.cwd }));
});
