import { randomUUID } from 'node:crypto';
import { isSessionState, QUIESCENT_MACHINE_STATES } from '../../../machines/states.ts';
import { lifecycleKeys } from './keys.ts';
import { removeSession, type PurgeRecord, type RemoveDeps } from './remove.ts';

export interface SweepOptions {
  /** Retention of sessions without their own; 0 keeps them (only removals cut short are finished). */
  retentionMs: number;
  /** A removal on record for this long is taken to have been cut short (its process died): finished here. Default 60 s. */
  resumeAfterMs?: number;
  /** Sessions looked at per call, at most. Default 500. */
  batch?: number;
}

export interface SweepResult {
  /** Sessions stored before the lifecycle indexes existed that this sweep indexed (see BACKFILL). */
  backfilled: number;
  /** Removals cut short that this sweep finished. */
  resumed: number;
  /** Finished sessions removed because their retention ran out. */
  expired: number;
  /** false: another sweeper held the lock. */
  ran: boolean;
}

/** KEYS: finished. ARGV: sessionId, the score it was read with, new score | '' (remove). Only if the entry is unchanged. */
const RESCORE = `
if redis.call('ZSCORE', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
if ARGV[3] == '' then redis.call('ZREM', KEYS[1], ARGV[1]) else redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1]) end
return 1
`;

/**
 * Indexes one session stored before the lifecycle indexes existed (an older sessiond wrote it), unless
 * it is indexed already: a worker's INDEX of it, before or after, wins (all in the fleet slot, atomic).
 * KEYS: states, the state's set, finished, version, sessions. ARGV: sessionId, state, expireAt | ''.
 */
const BACKFILL = `
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
local created = redis.call('ZSCORE', KEYS[5], ARGV[1])
if not created then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], created, ARGV[1])
if ARGV[3] ~= '' then redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1]) end
redis.call('INCR', KEYS[4])
return 1
`;

/** Finished sessions are indexed for expiry; the removal checks again that each is quiescent. */
const FINISHED_STATES = new Set<string>(QUIESCENT_MACHINE_STATES);

/** KEYS: lock. ARGV: token. */
const UNLOCK = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`;

type ScriptFn = (...args: Array<string | number>) => Promise<unknown>;

/**
 * One pass of the lifecycle sweeper (one at a time, fleet-wide, by a lock): finishes removals cut
 * short, then removes the finished sessions whose retention ran out, from the `finished` index
 * (expiry time order: the cost is that of what expires, not of what is stored). Each removal is
 * checked again atomically (see MARK): a session that became active meanwhile is left alone and
 * leaves the index until it finishes again.
 */
export async function sweep(deps: RemoveDeps, options: SweepOptions): Promise<SweepResult> {
  const { redis } = deps;
  const lk = lifecycleKeys(deps.keys);
  const token = randomUUID();
  if ((await redis.set(lk.sweeper, token, 'PX', 60_000, 'NX')) !== 'OK')
    return { backfilled: 0, resumed: 0, expired: 0, ran: false };
  const define = (name: string, lua: string): ScriptFn => {
    if (!(name in redis)) redis.defineCommand(name, { numberOfKeys: 1, lua });
    return ((redis as unknown as Record<string, ScriptFn>)[name] as ScriptFn).bind(redis);
  };
  const rescore = define('sessiondLifecycleRescore', RESCORE);
  const unlock = define('sessiondLifecycleUnlock', UNLOCK);
  const batch = options.batch ?? 500;
  let resumed = 0;
  let expired = 0;
  let backfilled = 0;
  try {
    const now = Date.now();
    backfilled = await backfill(deps, options.retentionMs, batch);
    const [, flat] = await redis.hscan(lk.purging, '0', 'COUNT', batch);
    for (let i = 0; i + 1 < flat.length; i += 2) {
      const sessionId = flat[i] as string;
      const record = JSON.parse(flat[i + 1] as string) as PurgeRecord;
      if (now - record.at < (options.resumeAfterMs ?? 60_000)) continue;
      const result = await removeSession(deps, sessionId, {
        mode: record.mode,
        retentionMs: options.retentionMs,
        waitMs: 0,
      });
      if (result.outcome === 'removed') resumed += 1;
    }
    // Every index shard's expiry index (see keys.ts), up to `batch` sessions each.
    const shards = await deps.queue.fleetShards();
    for (let shard = 0; shard < shards; shard += 1) {
      const finished = lifecycleKeys(deps.keys, shard).finished;
      const due = await redis.zrangebyscore(finished, '-inf', now, 'WITHSCORES', 'LIMIT', 0, batch);
      for (let i = 0; i + 1 < due.length; i += 2) {
        const sessionId = due[i] as string;
        const score = due[i + 1] as string;
        const result = await removeSession(deps, sessionId, { mode: 'expire', retentionMs: options.retentionMs });
        if (result.outcome === 'removed') expired += 1;
        else if (result.outcome === 'not_expired')
          await rescore(finished, sessionId, score, result.expireAt > 0 ? result.expireAt : '');
        else if (result.outcome !== 'stopped') await rescore(finished, sessionId, score, '');
      }
    }
  } finally {
    // The lock lapses with its TTL if it cannot be given back.
    await unlock(lk.sweeper, token).catch(() => undefined);
  }
  return { backfilled, resumed, expired, ran: true };
}

/**
 * One step of the backfill (shard 0 only: every session stored before index shards is there): sessions stored by a sessiond from before the lifecycle indexes are in
 * the listing but in no state set and not in the expiry index, so they were neither counted by
 * state, nor filtered, nor ever expired. Each sweep indexes up to `batch` of them, walking the
 * listing with ZSCAN (which returns every member present for the whole walk at least once), until
 * the walk is through; from then on it costs one GET per sweep.
 */
async function backfill(deps: RemoveDeps, retentionMs: number, batch: number): Promise<number> {
  const { redis, keys } = deps;
  const lk = lifecycleKeys(keys);
  const cursor = (await redis.get(lk.backfill)) ?? '0';
  if (cursor === 'done') return 0;
  if (!('sessiondLifecycleBackfill' in redis))
    redis.defineCommand('sessiondLifecycleBackfill', { numberOfKeys: 5, lua: BACKFILL });
  const index = (redis as unknown as Record<string, ScriptFn>)['sessiondLifecycleBackfill'] as ScriptFn;
  const [next, flat] = await redis.zscan(keys.sessions, cursor, 'COUNT', batch);
  const ids = flat.filter((_, i) => i % 2 === 0);
  const known = ids.length === 0 ? [] : await redis.hmget(lk.states, ...ids);
  const missing = ids.filter((_, i) => known[i] === null);
  let indexed = 0;
  for (const sessionId of missing) {
    const [state, updatedAt, createdAt, own] = await redis.hmget(
      keys.session(sessionId, 'meta'),
      'state',
      'updatedAt',
      'createdAt',
      'retention',
    );
    const current = state ?? 'queued';
    if (createdAt === null || !isSessionState(current)) continue;
    const retention = own === null || own === '' ? retentionMs : Number(own);
    const expireAt =
      FINISHED_STATES.has(current) && retention > 0 ? String(Number(updatedAt ?? createdAt) + retention) : '';
    indexed += Number(
      await index.call(
        redis,
        lk.states,
        lk.byState(current),
        lk.finished,
        lk.version,
        keys.sessions,
        sessionId,
        current,
        expireAt,
      ),
    );
  }
  await redis.set(lk.backfill, next === '0' ? 'done' : next);
  return indexed;
}
