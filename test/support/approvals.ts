import type { DeploymentPolicy } from '../../src/policy/schema.ts';
import type { StoredMessage } from '../../src/runtime/store/session-store.ts';
import { createKeys } from '../../src/runtime/keys.ts';
import { createSessionQueue } from '../../src/runtime/queue.ts';
import { Runtime } from '../../src/runtime/runtime.ts';
import { internals } from '../../src/runtime/internals.ts';
import { SessionWorker, WORKER_DEFAULTS } from '../../src/runtime/worker.ts';
import { FAST_WORKER, turnEnded, until, type Harness } from './runtime.ts';

/**
 * A permission request waiting in the session, as an attempt in `ask` mode stores it (see
 * src/runtime/approvals/store.ts), for tests that need one to answer without running an agent.
 */
export async function seedApproval(
  runtime: Runtime,
  sessionId: string,
  requestId = 't1-0123456789ab-1',
): Promise<string> {
  const request = {
    requestId,
    turn: 1,
    toolCallId: 'call-1',
    tool: 'shell',
    kind: 'execute',
    arguments: { command: 'ls' },
    options: [
      { optionId: 'allow_once', name: 'Allow', kind: 'allow_once' },
      { optionId: 'reject_once', name: 'Reject', kind: 'reject_once' },
    ],
    requestedAt: Date.now(),
    deadlineAt: Date.now() + 60_000,
  };
  await internals(runtime).redis.hset(
    internals(runtime).keys.session(sessionId, 'approvals'),
    requestId,
    JSON.stringify(request),
  );
  return requestId;
}

/**
 * A runtime and a worker of their own (a prefix of their own, the harness's Redis) under another
 * deployment policy, e.g. a short approvals deadline.
 */
export async function deploymentWith(
  h: Harness,
  policy: DeploymentPolicy,
  agentOptions: Record<string, Record<string, unknown>>,
): Promise<{ runtime: Runtime; close(): Promise<void> }> {
  const prefix = `${h.prefix}-deadline`;
  const keys = createKeys(prefix);
  const runtime = new Runtime({ connect: h.connect, prefix, policy });
  const worker = new SessionWorker({
    ...WORKER_DEFAULTS,
    ...FAST_WORKER,
    connect: h.connect,
    keys,
    queue: createSessionQueue(h.connect('deadline-queue'), keys),
    concurrency: 1,
    agentOptions,
    policy,
  });
  await worker.start();
  return {
    runtime,
    close: async () => {
      await worker.close(2000);
      await runtime.close();
    },
  };
}

/** The contents of the session's messages of one type, in order. */
export const ofType = (messages: readonly StoredMessage[], type: string): Array<Record<string, unknown>> =>
  messages.filter((m) => m.type === type).map((m) => m.content as Record<string, unknown>);

/** The session's first `approval.requested`, once its attempt has asked (a real agent may take a while). */
export function firstApprovalRequest(
  runtime: Runtime,
  sessionId: string,
  timeoutMs = 120_000,
): Promise<Record<string, unknown>> {
  return until(
    async () => ofType(await runtime.readMessages(sessionId), 'approval.requested')[0],
    timeoutMs,
    'approval.requested',
  );
}

/** Answers the request as `cli:test` and waits for turn 1 to end (a real agent goes on after it): the state it ended in, and the session's messages. */
export async function decideAndEnd(
  runtime: Runtime,
  sessionId: string,
  request: Record<string, unknown>,
  decision: 'allow' | 'deny',
  optionId?: string,
): Promise<{ state: string; messages: StoredMessage[] }> {
  await runtime.decideApproval(sessionId, String(request.requestId), decision, 'cli:test', optionId);
  const { state } = await turnEnded(runtime, sessionId, 1, 120_000);
  return { state, messages: await runtime.readMessages(sessionId) };
}
