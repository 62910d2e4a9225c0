import type { Redis } from 'ioredis';
import { isCluster } from './connection.ts';

/**
 * One field of many hashes (sessions' metas: keys of many slots). On one Redis one pipeline; on a
 * cluster, where ioredis refuses a pipeline over keys of several nodes, one HGET per key, all sent
 * at once (each to its slot's master). Contract: one value (or null) per key, in order; rejects
 * when a command fails.
 */
export async function hgetEach(redis: Redis, keys: readonly string[], field: string): Promise<Array<string | null>> {
  if (keys.length === 0) return [];
  if (isCluster(redis)) return Promise.all(keys.map((key) => redis.hget(key, field)));
  const pipeline = redis.pipeline();
  for (const key of keys) pipeline.hget(key, field);
  const replies = (await pipeline.exec()) ?? [];
  return keys.map((_, i) => {
    const [error, value] = replies[i] ?? [null, null];
    if (error !== null) throw error;
    return (value as string | null | undefined) ?? null;
  });
}
