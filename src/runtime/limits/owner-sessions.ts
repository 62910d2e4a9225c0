import type { Redis } from 'ioredis';
import { QuotaError } from '../../errors.ts';
import type { Keys } from '../keys.ts';

/** A reservation younger than this is never pruned (its session may be being created right now): a deleted session frees its slot after it. */
export const PRUNE_AFTER_MS = 10_000;
/** Existence checks sent at once while pruning. */
const PRUNE_CHUNK = 500;

/**
 * KEYS: the owner's set (zset: sessionId → when it was reserved). ARGV: sessionId, max, now.
 * → {1} reserved now | {2} already counted | {0, count} the owner is at its cap.
 */
const RESERVE = `
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return {2} end
local count = redis.call('ZCARD', KEYS[1])
if count >= tonumber(ARGV[2]) then return {0, count} end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
return {1}
`;

/** The set of the sessions a token created (by the token's name, 1-64 letters, digits or _.-). */
export function ownerKey(keys: Keys, owner: string): string {
  return `{${keys.prefix}}:owner:${owner}:sessions`;
}

/**
 * Sessions per token (`maxSessions` of its entry): each new session is reserved in its token's set
 * before it is created; at the cap, the set is first pruned of sessions that no longer exist
 * (deleted, expired: their meta is gone), so it never counts more than the token's live sessions
 * plus the ones being created. Contract: `reserve` never throws for a full set, it says so;
 * `release` is for a reservation whose session was not created.
 */
export class OwnerSessions {
  readonly #redis: Redis;
  readonly #keys: Keys;

  constructor(redis: Redis, keys: Keys) {
    this.#redis = redis;
    this.#keys = keys;
  }

  async reserve(
    owner: string,
    sessionId: string,
    max: number,
    now = Date.now(),
  ): Promise<{ ok: true; reserved: boolean } | { ok: false; count: number }> {
    const key = ownerKey(this.#keys, owner);
    const first = await this.#reserve(key, sessionId, max, now);
    if (first.ok) return first;
    await this.#prune(key, now);
    return this.#reserve(key, sessionId, max, now);
  }

  async release(owner: string, sessionId: string): Promise<void> {
    await this.#redis.zrem(ownerKey(this.#keys, owner), sessionId);
  }

  /** How many sessions the owner's set counts now (live ones and reservations). */
  async count(owner: string): Promise<number> {
    return this.#redis.zcard(ownerKey(this.#keys, owner));
  }

  async #reserve(
    key: string,
    sessionId: string,
    max: number,
    now: number,
  ): Promise<{ ok: true; reserved: boolean } | { ok: false; count: number }> {
    const r = (await this.#redis.eval(RESERVE, 1, key, sessionId, max, now)) as number[];
    if (r[0] === 0) return { ok: false, count: Number(r[1]) };
    return { ok: true, reserved: r[0] === 1 };
  }

  async #prune(key: string, now: number): Promise<void> {
    const old = await this.#redis.zrangebyscore(key, '-inf', now - PRUNE_AFTER_MS);
    for (let i = 0; i < old.length; i += PRUNE_CHUNK) {
      const chunk = old.slice(i, i + PRUNE_CHUNK);
      const exists = await Promise.all(chunk.map((id) => this.#redis.exists(this.#keys.session(id, 'meta'))));
      const gone = chunk.filter((_, j) => exists[j] === 0);
      if (gone.length > 0) await this.#redis.zrem(key, ...gone);
    }
  }
}

/** Who creates a session, for its session cap: a token's name and its `maxSessions`. */
export interface SessionOwner {
  name: string;
  maxSessions: number;
}

/**
 * A slot of the owner's session cap for `sessionId` before it is created: true when one was taken
 * (give it back with `release` if the session is not created), false when the session already
 * exists or is already counted. QuotaError `maxSessions` (429, nothing written) at the cap.
 */
export async function reserveOwnedSession(
  redis: Redis,
  keys: Keys,
  owner: SessionOwner,
  sessionId: string,
): Promise<boolean> {
  if ((await redis.exists(keys.session(sessionId, 'meta'))) === 1) return false;
  const result = await new OwnerSessions(redis, keys).reserve(owner.name, sessionId, owner.maxSessions);
  if (!result.ok) {
    throw new QuotaError(
      'maxSessions',
      owner.maxSessions,
      `the token "${owner.name}" already has ${result.count} sessions (its maxSessions ${owner.maxSessions}): delete some, or ask for a higher cap; the session was not created`,
    );
  }
  return result.reserved;
}

/**
 * Runs `create` (an enqueue that may create `sessionId`) holding a slot of the owner's session cap:
 * the slot is taken first (QuotaError `maxSessions` at the cap, nothing written) and given back
 * when the session was not created (it existed, or the enqueue was refused or threw). No owner: just `create`.
 */
export async function withOwnerSlot<R extends { ok: boolean; created?: boolean }>(
  redis: Redis,
  keys: Keys,
  owner: SessionOwner | undefined,
  sessionId: string,
  create: () => Promise<R>,
): Promise<R> {
  if (owner === undefined) return create();
  const reserved = await reserveOwnedSession(redis, keys, owner, sessionId);
  const release = (): Promise<void> =>
    reserved ? new OwnerSessions(redis, keys).release(owner.name, sessionId) : Promise.resolve();
  let result: R;
  try {
    result = await create();
  } catch (error) {
    await release();
    throw error;
  }
  if (!(result.ok && result.created === true)) await release();
  return result;
}
