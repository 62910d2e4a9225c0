import { randomUUID } from 'node:crypto';
import { newJobId } from '../queue.ts';
import { pushRetry } from '../retry-turn.ts';
import { ConflictError, InputError, NotFoundError } from '../../errors.ts';
import { requestResume, wallToken } from '../resume-parked.ts';
import { BULK_CANCEL_MAX, CANCELLABLE_STATES, selectForCancel } from '../bulk-cancel.ts';
import { checkSessionId, type CallerParts } from './parts.ts';
import { getSession } from './session-view.ts';

// A session's turn from the caller's side: cancel it, retry a failed one, resume a parked one, cancel in bulk.

/** Cancels the session's current turn, wherever it runs. Throws NotFoundError for an unknown session. */
export async function cancel(
  parts: CallerParts,
  sessionId: string,
  reason = 'cancelled by operator',
): Promise<{ delivered: 'worker' | 'activation' }> {
  checkSessionId(sessionId);
  const { code, jobId } = await parts.store.requestCancel(sessionId, reason, newJobId(sessionId));
  if (code === -1) throw new NotFoundError(`unknown session "${sessionId}"`);
  await parts.bus.publish({ sessionId, kind: 'cancel' });
  if (code === 2) {
    // Parked in a long backoff: run its activation now, so the cancel does not wait for nextRetryAt.
    const job = await parts.queue.getJob(jobId);
    // Not delayed any more (it started meanwhile): its holder reads the cancel request.
    if (job !== undefined && (await job.isDelayed())) await job.promote().catch(() => undefined);
  }
  if (code === 3) {
    await parts.store.index(sessionId, { activation: 'add' });
    await parts.queue.addActivation(sessionId, jobId);
  }
  return { delivered: code === 1 ? 'worker' : 'activation' };
}

/**
 * Re-runs the session's failed last turn as a new turn (a new series of attempts under the policy in
 * force): the same prompt and options; its first attempt continues the agent's conversation as a
 * retry would (see machines/retry-request.ts). NotFoundError for an unknown session; ConflictError
 * when the last turn did not fail, a prompt waits, a cancel is pending or the session is being deleted.
 */
export async function retry(
  parts: CallerParts,
  sessionId: string,
): Promise<{ sessionId: string; turn: number; retryOf: number }> {
  checkSessionId(sessionId);
  const view = await getSession(parts, sessionId);
  if (view === null) throw new NotFoundError(`unknown session "${sessionId}"`);
  const turn = view.context?.turn ?? null;
  if (turn === null || turn.status !== 'failed')
    throw new ConflictError(
      `session "${sessionId}": its last turn ${turn === null ? 'does not exist' : `is ${turn.status}, not failed`}: there is nothing to retry`,
    );
  const prompt = {
    id: randomUUID(),
    text: turn.text,
    options: turn.options,
    enqueuedAt: Date.now(),
    retryOf: turn.index,
  };
  const result = await pushRetry(parts.store, sessionId, turn.index, prompt, newJobId(sessionId));
  if (!result.ok) {
    if (result.reason === 'unknown_session') throw new NotFoundError(`unknown session "${sessionId}"`);
    if (result.reason === 'deleting') throw new ConflictError(`session "${sessionId}" is being deleted`);
    if (result.reason === 'cancel_pending')
      throw new ConflictError(`session "${sessionId}" has a cancel pending: retry once it is applied`);
    if (result.reason === 'prompts_waiting')
      throw new ConflictError(
        `session "${sessionId}" has prompts waiting (${result.waiting}): a retry runs only right after the failed turn`,
      );
    if (result.reason !== 'not_failed') throw new Error('unreachable');
    throw new ConflictError(
      `session "${sessionId}": turn ${turn.index} is no longer its failed last turn (now ${result.status}, turn ${result.turnIndex}): there is nothing to retry`,
    );
  }
  await parts.store.index(sessionId, {
    touch: true,
    expireAt: 'remove',
    ...(result.jobId !== null ? { activation: 'add' as const } : {}),
  });
  if (result.jobId !== null) await parts.queue.addActivation(sessionId, result.jobId);
  else await parts.bus.publish({ sessionId, kind: 'prompt' });
  return { sessionId, turn: result.turn, retryOf: turn.index };
}

/**
 * Resumes a session parked at a quota wall now, before the provider's reset: its next attempt starts
 * (under a fleet limit, once admitted). NotFoundError for an unknown session; ConflictError when it is
 * not parked (or is being deleted). Not to be confused with resumeDispatch (paused dispatch).
 */
export async function resumeParked(
  parts: CallerParts,
  sessionId: string,
): Promise<{ sessionId: string; turn: number; parkedUntil: number; delivered: 'worker' | 'activation' }> {
  checkSessionId(sessionId);
  const view = await getSession(parts, sessionId);
  if (view === null) throw new NotFoundError(`unknown session "${sessionId}"`);
  const context = view.context;
  const wall = context?.turn?.quotaWall ?? null;
  if (view.state !== 'parked' || context === null || wall === null)
    throw new ConflictError(
      `session "${sessionId}" is ${view.state}, not parked at a quota wall: there is nothing to resume`,
    );
  if (!(await requestResume(parts.store, sessionId, wallToken(context))))
    throw new ConflictError(`session "${sessionId}" is being deleted`);
  await parts.bus.publish({ sessionId, kind: 'resume' });
  // Parked, nobody holds it: run its (delayed) activation now; its holder reads the request.
  const jobId = await parts.store.activeJobId(sessionId);
  const job = jobId === null ? undefined : await parts.queue.getJob(jobId);
  const delayed = job !== undefined && (await job.isDelayed());
  // Not delayed any more (it started meanwhile): its holder reads the resume request.
  if (delayed) await job.promote().catch(() => undefined);
  return { sessionId, turn: context.turnIndex, parkedUntil: wall.until, delivered: delayed ? 'activation' : 'worker' };
}

/**
 * Cancels every session in `state` (queued, running or backoff), optionally only those of `agent`;
 * with `dryRun` only lists them. Served by the state's index, not a scan. InputError for a bad field.
 */
export async function cancelMatching(
  parts: CallerParts,
  filter: {
    state?: unknown;
    agent?: unknown;
    dryRun?: boolean;
    reason?: string;
    max?: number;
  },
): Promise<{
  dryRun: boolean;
  matched: Array<{ sessionId: string; state: string; agent: string }>;
  cancelled: number;
}> {
  const issues: Array<{ field: string; message: string }> = [];
  if (typeof filter.state !== 'string' || !(CANCELLABLE_STATES as readonly string[]).includes(filter.state))
    issues.push({
      field: 'state',
      message: `must be one of ${CANCELLABLE_STATES.join(', ')} (got ${JSON.stringify(filter.state ?? null)})`,
    });
  if (
    filter.agent !== undefined &&
    (typeof filter.agent !== 'string' || filter.agent === '' || filter.agent.length > 100)
  )
    issues.push({ field: 'agent', message: 'must be an agent name' });
  if (filter.max !== undefined && (!Number.isSafeInteger(filter.max) || filter.max < 1 || filter.max > BULK_CANCEL_MAX))
    issues.push({ field: 'max', message: `must be an integer from 1 to ${BULK_CANCEL_MAX}` });
  if (issues.length > 0) throw new InputError(issues);
  const matched = await selectForCancel(parts.redis, parts.keys, await parts.queue.fleetShards(), {
    state: filter.state as string,
    ...(typeof filter.agent === 'string' ? { agent: filter.agent } : {}),
    ...(filter.max === undefined ? {} : { max: filter.max }),
  });
  if (filter.dryRun === true) return { dryRun: true, matched, cancelled: 0 };
  let cancelled = 0;
  for (const s of matched) {
    // A session deleted meanwhile is simply not cancelled.
    const done = await cancel(parts, s.sessionId, filter.reason ?? `bulk cancel (state ${String(filter.state)})`).then(
      () => true,
      (error: Error) => (error instanceof NotFoundError ? false : Promise.reject(error)),
    );
    if (done) cancelled += 1;
  }
  return { dryRun: false, matched, cancelled };
}
