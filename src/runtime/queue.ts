import { randomUUID } from 'node:crypto';
import { Queue, type Job, type JobType } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Keys } from './keys.ts';
import { SESSION_ID_PATTERN } from './keys.ts';
import type { SessionStore } from './store/session-store.ts';
import { activationsKey } from './lifecycle/keys.ts';
import { MAX_PRIORITY, MIN_PRIORITY } from './priority.ts';
import { fleetShardCounter } from './fleet-shards.ts';

export { MAX_PRIORITY, MIN_PRIORITY };

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
  /** Partition 0 (the whole queue with one partition): Bull Board shows it. */
  readonly queue: Queue;
  /** How many partitions new activations are spread over (SESSIOND_QUEUE_PARTITIONS). */
  readonly partitions: number;
  /** The queue of partition `n` (made on first use; n may lie above `partitions`: an older, larger count). */
  partition(n: number): Queue;
  /** The partition a session's activations go to now. */
  partitionOf(sessionId: string): number;
  /** Every partition that may hold jobs: below the highest count this deployment recorded (see recordPartitions). */
  knownPartitions(): Promise<number>;
  /**
   * How many fleet-index shards readers merge (see keys.ts): shard 0, and one per partition below
   * this process's count or the highest one recorded, whichever is larger (none with one partition).
   * Read again after FLEET_SHARDS_TTL_MS, without recording anything.
   */
  fleetShards(): Promise<number>;
  /** The fleet-index shard a new session gets (kept for good): its partition's (n + 1), or 0 with one partition. */
  indexShardOf(sessionId: string): number;
  /** `priority`: the session's (-1000…1000, higher first; default 0). */
  addActivation(sessionId: string, jobId: string, priority?: number): Promise<void>;
  /** An activation job, wherever it is: its session's partition first, then every other known one. */
  getJob(jobId: string): Promise<Job | undefined>;
  /** Job counts by state, summed over every known partition. */
  jobCounts(...states: JobType[]): Promise<Record<string, number>>;
  close(): Promise<void>;
}

/** FNV-1a (32 bit) of the session id: stable across processes, versions and hosts. */
export function partitionOf(sessionId: string, partitions: number): number {
  if (partitions <= 1) return 0;
  let hash = 0x811c9dc5;
  for (let i = 0; i < sessionId.length; i += 1) {
    hash ^= sessionId.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % partitions;
}

/** KEYS: the record. ARGV: a partition count. Keeps the highest count ever used; → that count. */
const RECORD_PARTITIONS = `
local known = tonumber(redis.call('GET', KEYS[1]) or '0')
local mine = tonumber(ARGV[1])
if mine > known then
  redis.call('SET', KEYS[1], mine)
  return mine
end
return known
`;

export function newJobId(sessionId: string): string {
  // BullMQ job ids may not contain ':'.
  return `${sessionId}.${randomUUID()}`;
}

/**
 * The activation queue, in `partitions` BullMQ queues (default 1), each under its own hash tag
 * (`{<prefix>:q}`, `{<prefix>:q1}`, …): on a Redis Cluster each partition is a slot of its own, so
 * the queue's traffic spreads over the masters. A session always maps to the same partition for a
 * given count (partitionOf). The count in use is recorded (the highest ever), so that workers keep
 * consuming a partition that a smaller count no longer fills until it is empty.
 */

export function createSessionQueue(
  connect: Redis | (() => Redis),
  keys: Keys,
  options: { partitions?: number } = {},
): SessionQueue {
  const partitions = options.partitions ?? 1;
  // The connection is made on first use too, when given as a function.
  let made: Redis | null = null;
  const connection = (): Redis => (made ??= typeof connect === 'function' ? connect() : connect);
  if (!Number.isInteger(partitions) || partitions < 1 || partitions > 1024)
    throw new Error(`queue partitions: must be an integer from 1 to 1024 (got ${partitions})`);
  const queues = new Map<number, Queue>();
  const partition = (n: number): Queue => {
    let queue = queues.get(n);
    if (queue === undefined) {
      queue = new Queue(QUEUE_NAME, {
        connection: connection(),
        prefix: keys.queuePartitionPrefix(n),
        defaultJobOptions: JOB_OPTIONS,
      });
      queues.set(n, queue);
    }
    return queue;
  };
  const fleetShards = fleetShardCounter(connection, keys, partitions);
  let recorded: Promise<number> | null = null;
  const knownPartitions = (): Promise<number> => {
    recorded ??= recordPartitions(connection(), keys, partitions).catch((error: unknown) => {
      recorded = null;
      throw error;
    });
    return recorded;
  };
  return {
    name: QUEUE_NAME,
    get queue() {
      return partition(0);
    },
    partitions,
    partition,
    partitionOf: (sessionId) => partitionOf(sessionId, partitions),
    knownPartitions,
    fleetShards,
    indexShardOf: (sessionId) => (partitions > 1 ? partitionOf(sessionId, partitions) + 1 : 0),
    async addActivation(sessionId, jobId, priority = 0) {
      if (partitions > 1) await knownPartitions();
      await partition(partitionOf(sessionId, partitions)).add(
        ACTIVATION_JOB,
        { sessionId },
        { jobId, priority: bullPriority(priority) },
      );
    },
    async getJob(jobId) {
      const sessionId = jobId.slice(0, jobId.lastIndexOf('.'));
      const home = partitionOf(sessionId, partitions);
      const found = await partition(home).getJob(jobId);
      if (found !== undefined) return found;
      const known = Math.max(partitions, await knownPartitions());
      for (let n = 0; n < known; n += 1) {
        if (n === home) continue;
        const job = await partition(n).getJob(jobId);
        if (job !== undefined) return job;
      }
      return undefined;
    },
    async jobCounts(...states: JobType[]) {
      const known = Math.max(partitions, await knownPartitions());
      const all = await Promise.all(Array.from({ length: known }, (_, n) => partition(n).getJobCounts(...states)));
      const sum: Record<string, number> = {};
      for (const counts of all) for (const [state, n] of Object.entries(counts)) sum[state] = (sum[state] ?? 0) + n;
      return sum;
    },
    async close() {
      await Promise.all([...queues.values()].map((q) => q.close()));
      // A connection made here (connect given as a function) is this queue's own, closed with it
      // (BullMQ leaves a connection it was given open); one passed in is the caller's.
      if (typeof connect === 'function' && made !== null) await made.quit().catch(() => made?.disconnect());
    },
  };
}

/** Records `partitions` as in use (the highest count wins) and gives the highest recorded count. */
export async function recordPartitions(redis: Redis, keys: Keys, partitions: number): Promise<number> {
  return Number(await redis.eval(RECORD_PARTITIONS, 1, keys.queuePartitions, partitions));
}

/** The session priorities -1000…1000 (higher first) as BullMQ's 1…2001 (lower first); every job has one, so none jumps the line unprioritized. */
export function bullPriority(priority: number): number {
  const p = Number.isInteger(priority) ? Math.min(MAX_PRIORITY, Math.max(MIN_PRIORITY, priority)) : 0;
  return MAX_PRIORITY + 1 - p;
}

export function parseJobData(data: unknown): { ok: true; sessionId: string } | { ok: false; message: string } {
  if (data === null || typeof data !== 'object')
    return { ok: false, message: 'job data must be an object {sessionId}' };
  const sessionId = (data as { sessionId?: unknown }).sessionId;
  if (typeof sessionId !== 'string' || !SESSION_ID_PATTERN.test(sessionId))
    return {
      ok: false,
      message: `job data: sessionId must match ${SESSION_ID_PATTERN} (got ${JSON.stringify(sessionId)})`,
    };
  return { ok: true, sessionId };
}

/** How old an activation must be before the reconciler checks that its job exists. */
const RECONCILE_AFTER_MS = 10_000;

/**
 * A process that died between creating an activation and adding its job (or a
 * job that failed unexpectedly) would leave a session with prompts and no job.
 * Re-adds the job of every activation older than a few seconds whose job is gone, in every index shard.
 */
export async function reconcileActivations(store: SessionStore, sessionQueue: SessionQueue): Promise<number> {
  const shards = await sessionQueue.fleetShards();
  let readded = 0;
  for (let shard = 0; shard < shards; shard += 1)
    readded += await reconcileShard(store, sessionQueue, activationsKey(store.keys, shard));
  return readded;
}

async function reconcileShard(store: SessionStore, sessionQueue: SessionQueue, activations: string): Promise<number> {
  const old = await store.redis.zrangebyscore(activations, 0, Date.now() - RECONCILE_AFTER_MS, 'LIMIT', 0, 500);
  let readded = 0;
  for (const sessionId of old) {
    const jobId = await store.activeJobId(sessionId);
    if (jobId === null) {
      await store.redis.zrem(activations, sessionId);
      continue;
    }
    // Wherever it is: a job added under an older partition count is still consumed there.
    const job = await sessionQueue.getJob(jobId);
    const state = job === undefined ? 'missing' : await job.getState();
    if (state === 'missing' || state === 'unknown' || state === 'completed' || state === 'failed') {
      // A job gone meanwhile needs no removal; the activation is added anew below.
      if (job !== undefined) await job.remove().catch(() => undefined);
      await sessionQueue.addActivation(sessionId, jobId);
      readded += 1;
    }
  }
  return readded;
}
