import type { Redis } from 'ioredis';
import { hgetEach } from '../redis/batch.ts';
import type { Keys } from '../keys.ts';
import { lifecycleKeys } from './keys.ts';
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

/** A cursor: the last session of a page and its score (creation time), so the next page starts right after it. */
export function encodeCursor(sessionId: string, score: string): string {
  return Buffer.from(JSON.stringify([score, sessionId]), 'utf8').toString('base64url');
}

export function decodeCursor(cursor: string): { sessionId: string; score: number } {
  try {
    const value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
    if (Array.isArray(value) && value.length === 2 && typeof value[1] === 'string' && Number.isFinite(Number(value[0]))) return { sessionId: value[1], score: Number(value[0]) };
  } catch {
    // fall through
  }
  throw new CursorError('must be the `next` of an earlier page');
}

/**
 * A page of sessions, newest first, from the listing index (all sessions, or one state's set).
 * Page N costs what page 1 costs: the cursor's rank is found in O(log n); a cursor whose session
 * has gone meanwhile goes on from its score.
 */
export async function listPage(redis: Redis, keys: Keys, filter: ListFilter = {}): Promise<ListPage> {
  const key = filter.state === undefined ? keys.sessions : lifecycleKeys(keys).byState(filter.state);
  const limit = Math.max(1, filter.limit ?? 100);
  let flat: string[];
  if (filter.cursor === undefined) {
    flat = await redis.zrevrange(key, 0, limit - 1, 'WITHSCORES');
  } else {
    const cursor = decodeCursor(filter.cursor);
    const rank = await redis.zrevrank(key, cursor.sessionId);
    flat =
      rank !== null
        ? await redis.zrevrange(key, rank + 1, rank + limit, 'WITHSCORES')
        : await redis.zrevrangebyscore(key, `(${cursor.score}`, '-inf', 'WITHSCORES', 'LIMIT', 0, limit);
  }
  const ids: string[] = [];
  const scores: string[] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) {
    ids.push(flat[i] as string);
    scores.push(flat[i + 1] as string);
  }
  const states = await hgetEach(
    redis,
    ids.map((id) => keys.session(id, 'meta')),
    'state',
  );
  const sessions = ids
    .map((sessionId, i) => ({ sessionId, state: states[i] ?? 'queued' }))
    // The state index trails the sessions' own records by a tick: a session that has just left the state is not shown under it.
    .filter((s) => filter.state === undefined || s.state === filter.state);
  const last = ids.length === limit ? ids.length - 1 : -1;
  return { sessions, next: last >= 0 ? encodeCursor(ids[last] as string, scores[last] as string) : null };
}
