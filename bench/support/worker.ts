import type { Redis } from 'ioredis';
import type { Keys } from '../../src/runtime/keys.ts';
import { createSessionQueue } from '../../src/runtime/queue.ts';
import { createRedis } from '../../src/runtime/redis/index.ts';
import { SessionWorker, WORKER_DEFAULTS, type WorkerOptions } from '../../src/runtime/worker.ts';

/** An in-process SessionWorker as the benchmarks run it: default timings, their concurrency, agents and log. */
export function benchWorker(
  connect: (role: string) => Redis,
  keys: Keys,
  options: Pick<WorkerOptions, 'concurrency' | 'agentOptions' | 'log'>,
): SessionWorker {
  return new SessionWorker({ connect, keys, queue: createSessionQueue(connect('worker-queue'), keys), ...WORKER_DEFAULTS, ...options });
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
