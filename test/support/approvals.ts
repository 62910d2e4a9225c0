import type { Runtime } from '../../src/runtime/runtime.ts';
import { internals } from '../../src/runtime/internals.ts';

/**
 * A permission request waiting in the session, as an attempt in `ask` mode stores it (see
 * src/runtime/approvals/store.ts), for tests that need one to answer without running an agent.
 */
export async function seedApproval(runtime: Runtime, sessionId: string, requestId = 't1-0123456789ab-1'): Promise<string> {
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
  await internals(runtime).redis.hset(internals(runtime).keys.session(sessionId, 'approvals'), requestId, JSON.stringify(request));
  return requestId;
}
