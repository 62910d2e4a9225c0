import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { ConflictError } from '../../src/runtime/lifecycle/errors.ts';
import { deploymentPolicy } from '../../src/runtime/deployment-policy.ts';
import { summarize } from '../../src/runtime/inspect.ts';
import { RuntimeMetrics } from '../../src/runtime/metrics.ts';
import { InputError, NotFoundError, Runtime } from '../../src/runtime/runtime.ts';
import type { StoredMessage } from '../../src/runtime/store/session-store.ts';
import { assistantText, turnEnded, until, useRuntimeSuite, type Harness } from '../support/runtime.ts';
import { deploymentWith, ofType } from '../support/approvals.ts';

/**
 * Durable tool approvals with a real ACP agent process (the fake one, on the SDK's agent side) in
 * `ask` mode through a real worker and Redis: the request waits for an operator, is shown as
 * awaiting approval, and the decision (an operator's, a policy rule's or the deadline's) reaches
 * the agent once.
 */

const FAKE = fileURLToPath(new URL('../fixtures/acp/fake-acp-agent.mjs', import.meta.url));
const state = mkdtempSync(join(tmpdir(), 'sessiond-approvals-'));
const OPERATOR = {
  'acp:fake': { command: process.execPath, args: [FAKE], env: { FAKE_ACP_STATE_DIR: state } },
  'acp:trusted': { command: process.execPath, args: [FAKE], env: { FAKE_ACP_STATE_DIR: state } },
};
const policyWith = (approvals: Record<string, unknown>) =>
  deploymentPolicy({
    workspace: tmpdir(),
    agents: OPERATOR,
    policy: { permissions: { 'acp:fake': { ceiling: 'ask' }, 'acp:trusted': { ceiling: 'ask' } }, approvals },
  });
const policy = policyWith({ deadlineMs: 600_000, autoAllow: [{ agent: 'acp:trusted', kind: 'execute' }] });
const ASK = { agent: 'acp:fake', permissionMode: 'ask' };

let h: Harness;
let runtime: Runtime;
useRuntimeSuite('approvals', {}, async (s) => {
  h = s.h;
  runtime = new Runtime({ connect: h.connect, prefix: h.prefix, policy });
  await h.startWorker({ agentOptions: OPERATOR, policy });
});
afterAll(async () => {
  await runtime?.close();
  rmSync(state, { recursive: true, force: true });
});

/** How often the fake agent's shell tool ran in the agent sessions of this log (it appends its own session id to `ran` when allowed). */
function ranIn(messages: readonly StoredMessage[]): number {
  const agentSessions = new Set(
    messages
      .filter((m) => m.type === 'session.started' || m.type === 'session.resumed')
      .map((m) => String((m.content as { sessionId: string }).sessionId)),
  );
  const lines = existsSync(join(state, 'ran')) ? readFileSync(join(state, 'ran'), 'utf8').split('\n') : [];
  return lines.filter((l) => agentSessions.has(l)).length;
}

async function waitingRequest(rt: Runtime, sessionId: string): Promise<string> {
  const requested = await until(
    async () => ofType(await rt.readMessages(sessionId), 'approval.requested')[0],
    30_000,
    'approval.requested',
  );
  return String(requested.requestId);
}

describe('durable tool approvals (permissionMode ask)', () => {
  it('a request waits for the operator, shown as awaiting approval in inspect and the metrics; approve gives the agent allow_once once', async () => {
    const { sessionId } = await runtime.enqueue({ prompt: 'ask', options: ASK });
    const requestId = await waitingRequest(runtime, sessionId);
    const requested = ofType(await runtime.readMessages(sessionId), 'approval.requested')[0]!;
    expect(requested).toMatchObject({ tool: 'rm -rf build', kind: 'execute', arguments: { command: 'rm -rf build' } });
    expect((requested.options as Array<{ kind: string }>).map((o) => o.kind)).toEqual([
      'allow_once',
      'allow_always',
      'reject_once',
    ]);

    const summary = summarize((await runtime.getSession(sessionId))!);
    expect(summary.state).toBe('running');
    expect(summary.approvals).toEqual([expect.objectContaining({ requestId, tool: 'rm -rf build' })]);
    expect(summary.approvals[0]?.decision).toBeUndefined();
    const metrics = new RuntimeMetrics(runtime);
    expect(await metrics.render()).toMatch(/^sessiond_approvals_waiting 1$/m);
    expect(ranIn(await runtime.readMessages(sessionId))).toBe(0);

    const decided = await runtime.decideApproval(sessionId, requestId, 'allow', 'cli:test', 'allow_once');
    expect(decided).toMatchObject({ outcome: 'allowed', optionId: 'yes', by: 'cli:test' });
    expect((await turnEnded(runtime, sessionId)).state).toBe('completed');
    const messages = await runtime.readMessages(sessionId);
    expect(assistantText(messages)).toBe('permission: yes');
    expect(ofType(messages, 'approval.decided')).toEqual([
      expect.objectContaining({ requestId, outcome: 'allowed', optionId: 'yes', by: 'cli:test' }),
    ]);
    expect(ranIn(messages)).toBe(1);
    await metrics.refresh(true);
    expect(await metrics.registry.getSingleMetricAsString('sessiond_approvals_waiting')).toMatch(
      /sessiond_approvals_waiting 0$/m,
    );
    // The turn is over: its requests are gone, the session no longer awaits anything.
    expect((await runtime.getSession(sessionId))?.approvals).toEqual([]);
  });

  it('deny gives the agent its reject option: the tool does not run, the turn goes on and completes', async () => {
    const { sessionId } = await runtime.enqueue({ prompt: 'ask', options: ASK });
    const requestId = await waitingRequest(runtime, sessionId);
    await runtime.decideApproval(sessionId, requestId, 'deny', 'http:ops', undefined, 'not on this branch');
    expect((await turnEnded(runtime, sessionId)).state).toBe('completed');
    const messages = await runtime.readMessages(sessionId);
    expect(assistantText(messages)).toBe('permission: no');
    expect(ofType(messages, 'approval.decided')).toEqual([
      expect.objectContaining({ outcome: 'denied', optionId: 'no', by: 'http:ops', reason: 'not on this branch' }),
    ]);
    expect(ofType(messages, 'tool.failed')).toEqual([expect.objectContaining({ toolCallId: 'call-sh' })]);
    expect(ranIn(messages)).toBe(0);
  });

  it('a second decision is refused (the first wins); an option the agent did not offer and an unknown request are refused, naming them', async () => {
    const { sessionId } = await runtime.enqueue({ prompt: 'ask', options: ASK });
    const requestId = await waitingRequest(runtime, sessionId);
    const notOffered = await runtime
      .decideApproval(sessionId, requestId, 'deny', 'cli:test', 'allow_once')
      .catch((e: unknown) => e);
    expect(notOffered).toBeInstanceOf(InputError);
    expect((notOffered as InputError).issues).toEqual([
      expect.objectContaining({ field: 'option', message: expect.stringContaining('no (reject_once)') }),
    ]);
    expect(
      await runtime.decideApproval(sessionId, 't1-000000000000-1', 'allow', 'cli:test').catch((e: unknown) => e),
    ).toBeInstanceOf(NotFoundError);
    expect(
      await runtime
        .decideApproval(sessionId, 'not-an-id', 'allow', 'cli:test')
        .catch((e: unknown) => (e as InputError).issues),
    ).toEqual([expect.objectContaining({ field: 'requestId' })]);
    await runtime.decideApproval(sessionId, requestId, 'allow', 'cli:first');
    const second = await runtime.decideApproval(sessionId, requestId, 'deny', 'cli:second').catch((e: unknown) => e);
    expect(second).toBeInstanceOf(ConflictError);
    expect((await turnEnded(runtime, sessionId)).state).toBe('completed');
    expect(ofType(await runtime.readMessages(sessionId), 'approval.decided')).toEqual([
      expect.objectContaining({ outcome: 'allowed', by: 'cli:first' }),
    ]);
  });

  it('a policy rule (agent acp:trusted, kind execute) allows at once, without waiting, and says so', async () => {
    const { sessionId } = await runtime.enqueue({
      prompt: 'ask',
      options: { agent: 'acp:trusted', permissionMode: 'ask' },
    });
    expect((await turnEnded(runtime, sessionId)).state).toBe('completed');
    const messages = await runtime.readMessages(sessionId);
    expect(assistantText(messages)).toBe('permission: yes');
    expect(ofType(messages, 'approval.requested')).toHaveLength(1);
    expect(ofType(messages, 'approval.decided')).toEqual([
      expect.objectContaining({ outcome: 'allowed', optionId: 'yes', by: 'policy' }),
    ]);
  });

  it('permissionMode ask is above the default ceiling (reject): refused naming the field unless the policy raises it', async () => {
    const strict = new Runtime({
      connect: h.connect,
      prefix: h.prefix,
      policy: deploymentPolicy({ workspace: tmpdir(), agents: OPERATOR }),
    });
    try {
      const error = await strict.enqueue({ prompt: 'ask', options: ASK }).catch((e: unknown) => e);
      expect((error as InputError).issues).toEqual([
        expect.objectContaining({
          field: 'options.permissionMode',
          message: expect.stringContaining('ceiling "reject"'),
        }),
      ]);
    } finally {
      await strict.close();
    }
  });

  it("nobody answers within the policy's deadline: the request is denied by the deadline", async () => {
    const { runtime: rt, close } = await deploymentWith(h, policyWith({ deadlineMs: 1000 }), OPERATOR);
    try {
      const { sessionId } = await rt.enqueue({ prompt: 'ask', options: ASK });
      expect((await turnEnded(rt, sessionId)).state).toBe('completed');
      const messages = await rt.readMessages(sessionId);
      expect(assistantText(messages)).toBe('permission: no');
      const [requested] = ofType(messages, 'approval.requested');
      const [decided] = ofType(messages, 'approval.decided');
      expect(decided).toMatchObject({ outcome: 'denied', optionId: 'no', by: 'deadline' });
      expect(Number(decided?.at)).toBeGreaterThanOrEqual(Number(requested?.deadlineAt));
    } finally {
      await close();
    }
  });
});
