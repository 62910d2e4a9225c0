import type { Redis } from 'ioredis';
import type { Keys } from './keys.ts';

/** How long a reader trusts the partition count it read (a count raised elsewhere is seen within this). */
export const FLEET_SHARDS_TTL_MS = 5_000;

/**
 * How many shards the fleet index has: one per partition ever used plus the unpartitioned one when
 * the queue has (or had) more than one partition, else 1. Read from the recorded partition count
 * (at least `partitions`, this process's own) and trusted for FLEET_SHARDS_TTL_MS. Apart from the
 * queue so that a reader (listing, inspect) needs neither BullMQ nor a queue.
 */
export function fleetShardCounter(connection: () => Redis, keys: Keys, partitions: number): () => Promise<number> {
  let shards: { at: number; count: Promise<number> } | null = null;
  return () => {
    if (shards === null || Date.now() - shards.at > FLEET_SHARDS_TTL_MS) {
      const count = connection()
        .get(keys.queuePartitions)
        .then((known) => {
          const count = Math.max(partitions, Number(known ?? 0) || 0);
          return count > 1 ? count + 1 : 1;
        });
      shards = { at: Date.now(), count };
      // The count is read again next time.
      count.catch(() => {
        if (shards?.count === count) shards = null;
      });
    }
    return shards.count;
  };
}
