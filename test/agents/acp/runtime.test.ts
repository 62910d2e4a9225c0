import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { deploymentPolicy } from '../../../src/runtime/deployment-policy.ts';
import { Runtime, InputError } from '../../../src/runtime/runtime.ts';
import { agentRecords, assistantText, turnEnded, until, useRuntimeSuite, type Harness } from '../../support/runtime.ts';

/** `acp:<name>` agents through the durable runtime: the operator configures them, callers pick one, the policy bounds them. */

const FAKE = fileURLToPath(new URL('../../fixtures/acp/fake-acp-agent.mjs', import.meta.url));
const state = mkdtempSync(join(tmpdir(), 'sessiond-acp-rt-'));
const OPERATOR = { 'acp:fake': { command: process.execPath, args: [FAKE], env: { FAKE_ACP_STATE_DIR: state } } };
const policy = deploymentPolicy({ workspace: tmpdir(), agents: OPERATOR });

let h: Harness;
let runtime: Runtime;
useRuntimeSuite('acp-runtime', {}, async (s) => {
  h = s.h;
  runtime = new Runtime({ connect: h.connect, prefix: h.prefix, policy });
  await h.startWorker({ agentOptions: OPERATOR, policy });
});
afterAll(async () => {
  await runtime?.close();
  rmSync(state, { recursive: true, force: true });
});

const NO_WAIT = { maxAttempts: 3, initialDelayMs: 0 };

describe('ACP agents in the durable runtime', () => {
  it('a caller picks acp:fake: the turn completes with its text, and a second turn resumes its session', async () => {
    const { sessionId } = await runtime.enqueue({ prompt: 'say hello world', options: { agent: 'acp:fake' } });
    expect((await turnEnded(runtime, sessionId)).state).toBe('completed');
    expect(assistantText(await runtime.readMessages(sessionId))).toBe('hello world');
    await runtime.enqueue({ sessionId, prompt: 'recall' });
    expect((await turnEnded(runtime, sessionId, 2)).state).toBe('completed');
    const messages = await runtime.readMessages(sessionId);
    expect(messages.filter((m) => m.type === 'session.resumed')).toHaveLength(1);
    expect(assistantText(messages)).toBe('hello worldsay hello world');
  });

  it('a 500 answer then success: the session machine retries, one prompt per attempt', async () => {
    const { sessionId } = await runtime.enqueue({
      prompt: 'flaky',
      options: { agent: 'acp:fake' },
      retryPolicy: NO_WAIT,
    });
    const view = await turnEnded(runtime, sessionId);
    const messages = await runtime.readMessages(sessionId);
    expect(view.state).toBe('completed');
    expect(
      messages.filter((m) => m.type === 'terminal.failed').map((m) => (m.content as { category: string }).category),
    ).toEqual(['server_error']);
    expect(assistantText(messages)).toBe('second time lucky');
  });

  it('an auth error is not retried: the turn fails after one attempt', async () => {
    const { sessionId } = await runtime.enqueue({
      prompt: 'auth error',
      options: { agent: 'acp:fake' },
      retryPolicy: NO_WAIT,
    });
    expect((await turnEnded(runtime, sessionId)).state).toBe('failed');
    expect((await runtime.readMessages(sessionId)).filter((m) => m.type === 'terminal.failed')).toHaveLength(1);
  });

  it('cancel during a long tool: the session is cancelled and no process of the agent is left', async () => {
    const { sessionId } = await runtime.enqueue({ prompt: 'long', options: { agent: 'acp:fake' } });
    await until(
      async () => (await runtime.readMessages(sessionId)).some((m) => m.type === 'tool.call'),
      30_000,
      'the tool call',
    );
    await runtime.cancel(sessionId, 'enough');
    expect((await turnEnded(runtime, sessionId)).state).toBe('cancelled');
    expect(await agentRecords(sessionId)).toEqual([]);
    // The attempt ends once in the log (issue 28), whatever the ACP agent answered to session/cancel: the call closed, then the cancel.
    const log = await runtime.readMessages(sessionId);
    expect(log.slice(-2).map((m) => [m.type, m.content])).toEqual([
      ['tool.failed', expect.objectContaining({ error: 'the attempt was cancelled' })],
      ['terminal.cancelled', { reason: 'enough' }],
    ]);
    expect(log.filter((m) => m.type.startsWith('terminal.'))).toHaveLength(1);
  });

  it('an ACP agent the operator did not configure is refused at enqueue, naming options.agent', async () => {
    const error = await runtime.enqueue({ prompt: 'say hi', options: { agent: 'acp:other' } }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InputError);
    expect((error as InputError).issues).toEqual([expect.objectContaining({ field: 'options.agent' })]);
  });

  it('permissionMode allow is above the default ceiling: refused naming the field; a policy may raise it', async () => {
    const error = await runtime
      .enqueue({ prompt: 'ask', options: { agent: 'acp:fake', permissionMode: 'allow' } })
      .catch((e: unknown) => e);
    expect((error as InputError).issues).toEqual([
      expect.objectContaining({
        field: 'options.permissionMode',
        message: expect.stringContaining('ceiling "reject"'),
      }),
    ]);
    const raised = deploymentPolicy({
      workspace: tmpdir(),
      agents: OPERATOR,
      policy: { permissions: { 'acp:fake': { ceiling: 'allow' } } },
    });
    expect(raised.permissions['acp:fake']?.ladder?.ceiling).toBe('allow');
  });

  it('a caller may not set the command or env of an ACP agent', async () => {
    const error = await runtime
      .enqueue({ prompt: 'say hi', options: { agent: 'acp:fake', command: '/bin/sh' } })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InputError);
    expect(String((error as Error).message)).toContain('command');
  });
});
