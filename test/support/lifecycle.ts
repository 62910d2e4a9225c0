import type { Redis } from 'ioredis';
import type { Keys } from '../../src/runtime/keys.ts';
import { SESSION_STATES } from '../../machines/states.ts';
import { lifecycleKeys } from '../../src/runtime/lifecycle/keys.ts';

/** Every key of one session found by SCAN (not by a list of parts: a part nobody deletes shows up). */
export async function scanSessionKeys(redis: Redis, keys: Keys, sessionId: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', `${keys.prefix}:{s:${sessionId}}:*`, 'COUNT', 1000);
    cursor = next;
    found.push(...batch);
  } while (cursor !== '0');
  return found.sort();
}

/** Where a session is still named fleet-wide: the listing, activations, expiry and state indexes, removals on record, BullMQ jobs. */
export async function fleetMentions(redis: Redis, keys: Keys, sessionId: string): Promise<string[]> {
  const lk = lifecycleKeys(keys);
  const out: string[] = [];
  for (const key of [
    keys.sessions,
    keys.activations,
    lk.finished,
    lk.changed,
    ...SESSION_STATES.map((s) => lk.byState(s)),
  ]) {
    if ((await redis.zscore(key, sessionId)) !== null) out.push(key);
  }
  for (const key of [lk.states, lk.purging]) if ((await redis.hexists(key, sessionId)) === 1) out.push(key);
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', `${keys.queuePrefix}:*:${sessionId}.*`, 'COUNT', 1000);
    cursor = next;
    out.push(...batch);
  } while (cursor !== '0');
  return out;
}

/** Nothing of the session is left but (optionally) its short-lived tombstone: checked by scanning. */
export async function leftovers(redis: Redis, keys: Keys, sessionId: string): Promise<string[]> {
  const tombstone = lifecycleKeys(keys).tombstone(sessionId);
  return [
    ...(await scanSessionKeys(redis, keys, sessionId)).filter((k) => k !== tombstone),
    ...(await fleetMentions(redis, keys, sessionId)),
  ];
}
