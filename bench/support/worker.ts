import { Worker, type Processor } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Keys } from '../../src/runtime/keys.ts';
import { createSessionQueue, QUEUE_NAME } from '../../src/runtime/queue.ts';
import { createRedis } from '../../src/runtime/redis/index.ts';
import { SessionWorker, WORKER_DEFAULTS, type WorkerOptions } from '../../src/runtime/worker.ts';

/** An in-process SessionWorker as the benchmarks run it: default timings, their concurrency, agents and log. */
export function benchWorker(
  connect: (role: string) => Redis,
  keys: Keys,
  options: Pick<WorkerOptions, 'concurrency' | 'agentOptions' | 'log'>,
): SessionWorker {
  return new SessionWorker({
    connect,
    keys,
    queue: createSessionQueue(connect('worker-queue'), keys),
    ...WORKER_DEFAULTS,
    ...options,
  });
}

/** Connections as the sessiond CLI makes them (src/runtime/redis: createRedis), each closed by `closeAll`. */
export function connector(url: string) {
  const made: Redis[] = [];
  const connect = (role: string): Redis => {
    const redis = createRedis(url, { role: `bench-${role}`, maxRetriesPerRequest: null, log: () => undefined });
    made.push(redis);
    return redis;
  };
  return { connect, closeAll: () => made.forEach((r) => r.disconnect()) };
}

/** A plain BullMQ worker on the activation queue, with the SessionWorker's lock and stall settings: the baseline's side, or a layer of queue-floor. */
export function bareWorker(
  connect: (role: string) => Redis,
  queuePrefix: string,
  concurrency: number,
  processor: Processor,
): Worker {
  return new Worker(QUEUE_NAME, processor, {
    connection: connect('base-worker'),
    prefix: queuePrefix,
    concurrency,
    lockDuration: WORKER_DEFAULTS.leaseTtlMs,
    stalledInterval: WORKER_DEFAULTS.stalledIntervalMs,
    maxStalledCount: Number.MAX_SAFE_INTEGER,
  });
}
