import { randomUUID } from 'node:crypto';
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
  if ((await redis.set(lk.sweeper, token, 'PX', 60_000, 'NX')) !== 'OK') return { resumed: 0, expired: 0, ran: false };
  const define = (name: string, lua: string): ScriptFn => {
    if (!(name in redis)) redis.defineCommand(name, { numberOfKeys: 1, lua });
    return ((redis as unknown as Record<string, ScriptFn>)[name] as ScriptFn).bind(redis);
  };
  const rescore = define('sessiondLifecycleRescore', RESCORE);
  const unlock = define('sessiondLifecycleUnlock', UNLOCK);
  const batch = options.batch ?? 500;
  let resumed = 0;
  let expired = 0;
  try {
    const now = Date.now();
    const [, flat] = await redis.hscan(lk.purging, '0', 'COUNT', batch);
    for (let i = 0; i + 1 < flat.length; i += 2) {
      const sessionId = flat[i] as string;
      const record = JSON.parse(flat[i + 1] as string) as PurgeRecord;
      if (now - record.at < (options.resumeAfterMs ?? 60_000)) continue;
      const result = await removeSession(deps, sessionId, { mode: record.mode, retentionMs: options.retentionMs, waitMs: 0 });
      if (result.outcome === 'removed') resumed += 1;
    }
    const due = await redis.zrangebyscore(lk.finished, '-inf', now, 'WITHSCORES', 'LIMIT', 0, batch);
    for (let i = 0; i + 1 < due.length; i += 2) {
      const sessionId = due[i] as string;
      const score = due[i + 1] as string;
      const result = await removeSession(deps, sessionId, { mode: 'expire', retentionMs: options.retentionMs });
      if (result.outcome === 'removed') expired += 1;
      else if (result.outcome === 'not_expired') await rescore(lk.finished, sessionId, score, result.expireAt > 0 ? result.expireAt : '');
      else if (result.outcome !== 'stopped') await rescore(lk.finished, sessionId, score, '');
    }
  } finally {
    await unlock(lk.sweeper, token).catch(() => undefined);
  }
  return { resumed, expired, ran: true };
}
