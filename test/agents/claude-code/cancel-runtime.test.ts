import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { afterAll, describe, expect, it } from 'vitest';
import { deploymentPolicy } from '../../../src/runtime/deployment-policy.ts';
import { Runtime } from '../../../src/runtime/runtime.ts';
import { claudeBin, createClaudeEnv, type ClaudeEnv } from '../../support/claude-code-env.ts';
import { startFakeAnthropicServer, type FakeAnthropicServer } from '../../support/fake-anthropic-server.ts';
import { agentRecords, turnEnded, until, useRuntimeSuite } from '../../support/runtime.ts';

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
  it('ends the attempt with one terminal.cancelled, the running Bash call closed first, nothing left running', async () => {
    const { sessionId } = await runtime.enqueue({
      prompt: 'Run the long command',
      options: { agent: 'claude-code', model: 'long-tool-bg', cwd: env.cwd },
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
    const calls = log
      .filter((m) => m.type === 'tool.call')
      .map((m) => (m.content as { toolCallId: string }).toolCallId);
    const results = log
      .filter((m) => m.type === 'tool.completed' || m.type === 'tool.failed')
      .map((m) => (m.content as { toolCallId: string }).toolCallId);
    expect(calls.length).toBeGreaterThan(0);
    expect(results.sort()).toEqual([...calls].sort());
    expect(log.filter((m) => m.type === 'tool.failed').at(-1)?.content).toMatchObject({
      error: 'the attempt was cancelled',
    });
    expect(await agentRecords(sessionId)).toEqual([]);
  });
});
