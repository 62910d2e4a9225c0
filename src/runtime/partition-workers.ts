import { Worker, type Job } from 'bullmq';
import type { WorkerOptions } from './worker-options.ts';

/**
 * The queue partitions a worker takes jobs from, in order: `consumePartitions` when given, else
 * every partition below the highest count the deployment has used (see WorkerOptions).
 */
export async function consumedPartitions(options: WorkerOptions): Promise<number[]> {
  const known = Math.max(options.queue.partitions, await options.queue.knownPartitions());
  return [...new Set(options.consumePartitions ?? Array.from({ length: known }, (_, n) => n))].sort((x, y) => x - y);
}

/**
 * One BullMQ worker per consumed partition (each its own blocking connection), all running
 * `processor`; the concurrency is shared out among them, at least one each: a worker consuming
 * P partitions drives up to max(concurrency, P).
 */
export function partitionWorkers(
  options: WorkerOptions,
  consumed: readonly number[],
  processor: (job: Job, token?: string, signal?: AbortSignal) => Promise<string>,
): Worker[] {
  const share = (i: number): number =>
    Math.max(
      1,
      Math.floor(options.concurrency / consumed.length) + (i < options.concurrency % consumed.length ? 1 : 0),
    );
  return consumed.map(
    (n, i) =>
      new Worker(options.queue.name, processor, {
        connection: options.connect(consumed.length === 1 ? 'worker-bullmq' : `worker-bullmq-${n}`),
        prefix: options.keys.queuePartitionPrefix(n),
        concurrency: share(i),
        lockDuration: options.leaseTtlMs,
        stalledInterval: options.stalledIntervalMs,
        // The session machine is the only retry owner: a job that stalls is simply taken again.
        maxStalledCount: Number.MAX_SAFE_INTEGER,
        autorun: true,
      }),
  );
}
