import type { Redis } from 'ioredis';
import { hgetEach } from '../redis/batch.ts';
import type { Keys } from '../keys.ts';
import { lifecycleKeys, sessionsKey } from './keys.ts';
import { CursorError } from '../../errors.ts';

export interface ListFilter {
  state?: string;
  limit?: number;
  /** `next` of the previous page. */
  cursor?: string;
}

export interface ListPage {
  /** Newest first; `state` as each session's own record says it (the index trails it by a tick). */
  sessions: Array<{ sessionId: string; state: string }>;
  /** The cursor of the next page, null on the last one. */
  next: string | null;
}

/** Defined with every other error of sessiond in src/errors.ts. */
export { CursorError };

/** A position in one shard's listing: the last session taken from it and its score (creation time); null: none yet. */
type Position = { sessionId: string; score: number } | null;

/**
 * A cursor: where the page ended in each index shard (the last session taken from it and its score),
 * so the next page starts right after it in every shard. One shard: `[score, sessionId]`, as before
 * shards existed; several: `{"p": [[score, sessionId] | null, …]}`, one position per shard.
 */
export function encodeCursor(sessionId: string, score: string): string {
  return Buffer.from(JSON.stringify([score, sessionId]), 'utf8').toString('base64url');
}

function encodePositions(positions: readonly Position[]): string {
  if (positions.length === 1 && positions[0] !== null && positions[0] !== undefined)
    return encodeCursor(positions[0].sessionId, String(positions[0].score));
  return Buffer.from(
    JSON.stringify({ p: positions.map((p) => (p === null ? null : [String(p.score), p.sessionId])) }),
    'utf8',
  ).toString('base64url');
}

function position(value: unknown): Position | undefined {
  if (value === null) return null;
  if (Array.isArray(value) && value.length === 2 && typeof value[1] === 'string' && Number.isFinite(Number(value[0])))
    return { sessionId: value[1], score: Number(value[0]) };
  return undefined;
}

export function decodeCursor(cursor: string): { sessionId: string; score: number } {
  const decoded = decodePositions(cursor, 1)[0];
  if (decoded === null || decoded === undefined) throw new CursorError('must be the `next` of an earlier page');
  return decoded;
}

/** One position per shard. A one-shard cursor read with several shards (the count was raised meanwhile) holds for every shard. */
function decodePositions(cursor: string, shards: number): Position[] {
  try {
    const value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
    const single = position(value);
    if (single !== undefined && single !== null) return Array.from({ length: shards }, () => single);
    if (value !== null && typeof value === 'object' && Array.isArray((value as { p?: unknown }).p)) {
      const list = ((value as { p: unknown[] }).p ?? []).map(position);
      if (list.length > 0 && list.length <= 1024 && list.every((p) => p !== undefined))
        return Array.from({ length: shards }, (_, n) => (list[n] as Position | undefined) ?? null);
    }
  } catch {
    // fall through
  }
  throw new CursorError('must be the `next` of an earlier page');
}

/** Up to `limit` entries of one shard's set after `from`, newest first: the position's rank in O(log n), or its score if it has gone meanwhile. */
async function shardPage(
  redis: Redis,
  key: string,
  from: Position,
  limit: number,
): Promise<Array<{ id: string; score: number }>> {
  let flat: string[];
  if (from === null) {
    flat = await redis.zrevrange(key, 0, limit - 1, 'WITHSCORES');
  } else {
    const rank = await redis.zrevrank(key, from.sessionId);
    flat =
      rank !== null
        ? await redis.zrevrange(key, rank + 1, rank + limit, 'WITHSCORES')
        : await redis.zrevrangebyscore(key, `(${from.score}`, '-inf', 'WITHSCORES', 'LIMIT', 0, limit);
  }
  const out: Array<{ id: string; score: number }> = [];
  for (let i = 0; i + 1 < flat.length; i += 2) out.push({ id: flat[i] as string, score: Number(flat[i + 1]) });
  return out;
}

/**
 * A page of sessions, newest first, from the listing index (all sessions, or one state's set),
 * merged over the `shards` index shards (see keys.ts). Page N costs what page 1 costs: each shard
 * is read from the cursor's position in it, its rank found in O(log n) (a position whose session
 * has gone meanwhile goes on from its score), at most `limit` entries per shard.
 */
export async function listPage(redis: Redis, keys: Keys, filter: ListFilter = {}, shards = 1): Promise<ListPage> {
  const limit = Math.max(1, filter.limit ?? 100);
  const count = Math.max(1, shards);
  const positions: Position[] =
    filter.cursor === undefined ? Array.from({ length: count }, () => null) : decodePositions(filter.cursor, count);
  const pages = await Promise.all(
    positions.map((from, n) => {
      const lk = lifecycleKeys(keys, n);
      return shardPage(
        redis,
        filter.state === undefined ? sessionsKey(keys, n) : lk.byState(filter.state),
        from,
        limit,
      );
    }),
  );
  // Newest first over every shard; equal times in the order Redis gives them in one set (by id, descending).
  const merged = pages.flatMap((page, shard) => page.map((entry) => ({ ...entry, shard })));
  merged.sort((a, b) => b.score - a.score || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
  const taken = merged.slice(0, limit);
  const next = [...positions];
  for (const entry of taken) next[entry.shard] = { sessionId: entry.id, score: entry.score };
  const ids = taken.map((entry) => entry.id);
  const states = await hgetEach(
    redis,
    ids.map((id) => keys.session(id, 'meta')),
    'state',
  );
  const sessions = ids
    .map((sessionId, i) => ({ sessionId, state: states[i] ?? 'queued' }))
    // The state index trails the sessions' own records by a tick: a session that has just left the state is not shown under it.
    .filter((s) => filter.state === undefined || s.state === filter.state);
  return { sessions, next: ids.length === limit ? encodePositions(next) : null };
}
