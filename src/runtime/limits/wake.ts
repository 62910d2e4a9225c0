import type { SessionQueue } from '../queue.ts';
import type { SessionStore } from '../store/session-store.ts';

/**
 * Runs the activations of these sessions next: capacity was made for them. A parked (delayed) one is
 * promoted, and a woken one goes ahead of every other waiting activation (BullMQ's priority 0: the
 * first activations of new sessions, which can only queue behind them, must not keep the head waiters
 * of a limit from taking their slot). One that is running or gone is left alone.
 */
export async function promoteActivations(
  store: SessionStore,
  queue: SessionQueue,
  sessionIds: readonly string[],
): Promise<number> {
  let promoted = 0;
  for (const sessionId of sessionIds) {
    // A wake is a hint: the session also looks again by itself (limitPollMs).
    const jobId = await store.activeJobId(sessionId).catch(() => null);
    if (jobId === null) continue;
    // A wake is a hint: the session also looks again by itself (limitPollMs).
    const job = await queue.getJob(jobId).catch(() => undefined);
    if (job === undefined) continue;
    // A wake is a hint: the session also looks again by itself (limitPollMs).
    const state = await job.getState().catch(() => 'unknown');
    if (state !== 'delayed' && state !== 'prioritized') continue;
    try {
      await job.changePriority({ priority: 0 });
      if (state === 'delayed') await job.promote();
      promoted += 1;
    } catch {
      // It moved on meanwhile (taken by a worker, removed): nothing to wake.
    }
  }
  return promoted;
}
