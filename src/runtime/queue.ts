import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import type { Queue } from 'bullmq';
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
  addActivation(sessionId: string, jobId: string): Promise<void>;
  close(): Promise<void>;
}

export function newJobId(sessionId: string): string {
  // BullMQ job ids may not contain ':'.
  return `${sessionId}.${randomUUID()}`;
}

// bullmq is CommonJS (Node's `import` of it loads the same module): required on first use, so a
// command that never touches the queue (`sessiond inspect`, `list`) does not pay for loading it.
const require = createRequire(import.meta.url);

/**
 * The queue of activation jobs. Its BullMQ Queue is made on first use (and its connection, when
 * given as a function); closing one never used costs nothing.
 */
export function createSessionQueue(connection: Redis | (() => Redis), keys: Keys): SessionQueue {
  let queue: Queue | null = null;
  const bull = (): Queue => {
    if (queue === null) {
      const { Queue: BullQueue } = require('bullmq') as typeof import('bullmq');
      queue = new BullQueue(QUEUE_NAME, { connection: typeof connection === 'function' ? connection() : connection, prefix: keys.queuePrefix, defaultJobOptions: JOB_OPTIONS });
    }
    return queue;
  };
  return {
    name: QUEUE_NAME,
    get queue() {
      return bull();
    },
    async addActivation(sessionId, jobId) {
      await bull().add(ACTIVATION_JOB, { sessionId }, { jobId });
    },
    async close() {
      await queue?.close();
    },
  };
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
