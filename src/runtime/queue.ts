import { randomUUID } from 'node:crypto';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Keys } from './keys.ts';
import { SESSION_ID_PATTERN } from './keys.ts';
import type { SessionStore } from './store/session-store.ts';

export const QUEUE_NAME = 'sessions';
export const ACTIVATION_JOB = 'activate';

/**
 * BullMQ jobs only activate sessions: one job per activation (its id is kept in
 * the session's `active` key), `attempts: 1` — the session machine is the only
 * retry owner.
 */
export const JOB_OPTIONS = { attempts: 1, removeOnComplete: true, removeOnFail: { count: 1000 } } as const;

export interface SessionQueue {
  readonly name: string;
  readonly queue: Queue;
  /** `priority`: the session's (-1000…1000, higher first; default 0). */
  addActivation(sessionId: string, jobId: string, priority?: number): Promise<void>;
  close(): Promise<void>;
}

export function newJobId(sessionId: string): string {
  // BullMQ job ids may not contain ':'.
  return `${sessionId}.${randomUUID()}`;
}

export function createSessionQueue(connection: Redis, keys: Keys): SessionQueue {
  const queue = new Queue(QUEUE_NAME, { connection, prefix: keys.queuePrefix, defaultJobOptions: JOB_OPTIONS });
  return {
    name: QUEUE_NAME,
    queue,
    async addActivation(sessionId, jobId, priority = 0) {
      await queue.add(ACTIVATION_JOB, { sessionId }, { jobId, priority: bullPriority(priority) });
    },
    async close() {
      await queue.close();
    },
  };
}

/** The session priorities -1000…1000 (higher first) as BullMQ's 1…2001 (lower first); every job has one, so none jumps the line unprioritized. */
export const MIN_PRIORITY = -1000;
export const MAX_PRIORITY = 1000;
export function bullPriority(priority: number): number {
  const p = Number.isInteger(priority) ? Math.min(MAX_PRIORITY, Math.max(MIN_PRIORITY, priority)) : 0;
  return MAX_PRIORITY + 1 - p;
}

export function parseJobData(data: unknown): { ok: true; sessionId: string } | { ok: false; message: string } {
  if (data === null || typeof data !== 'object') return { ok: false, message: 'job data must be an object {sessionId}' };
  const sessionId = (data as { sessionId?: unknown }).sessionId;
  if (typeof sessionId !== 'string' || !SESSION_ID_PATTERN.test(sessionId)) return { ok: false, message: `job data: sessionId must match ${SESSION_ID_PATTERN} (got ${JSON.stringify(sessionId)})` };
  return { ok: true, sessionId };
}

/** How old an activation must be before the reconciler checks that its job exists. */
const RECONCILE_AFTER_MS = 10_000;

/**
 * A process that died between creating an activation and adding its job (or a
 * job that failed unexpectedly) would leave a session with prompts and no job.
 * Re-adds the job of every activation older than a few seconds whose job is gone.
 */
export async function reconcileActivations(store: SessionStore, sessionQueue: SessionQueue): Promise<number> {
  const old = await store.redis.zrangebyscore(store.keys.activations, 0, Date.now() - RECONCILE_AFTER_MS, 'LIMIT', 0, 500);
  let readded = 0;
  for (const sessionId of old) {
    const jobId = await store.activeJobId(sessionId);
    if (jobId === null) {
      await store.redis.zrem(store.keys.activations, sessionId);
      continue;
    }
    const job = await sessionQueue.queue.getJob(jobId);
    const state = job === undefined ? 'missing' : await job.getState();
    if (state === 'missing' || state === 'unknown' || state === 'completed' || state === 'failed') {
      if (job !== undefined) await job.remove().catch(() => undefined);
      await sessionQueue.addActivation(sessionId, jobId);
      readded += 1;
    }
  }
  return readded;
}
