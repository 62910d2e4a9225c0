import { readdir } from 'node:fs/promises';
import type { Redis } from 'ioredis';
import type { Workspaces } from '../../workspace/types.ts';
import type { Keys } from '../keys.ts';
import { SESSION_ID_PATTERN } from '../keys.ts';
import { lifecycleKeys } from './keys.ts';

/** Removed sessions taken per sweep, at most (the rest go at the next sweeps). */
const GONE_PER_SWEEP = 100;
/** Local copies looked at per sweep, at most. */
const LOCAL_PER_SWEEP = 1000;

export interface WorkspaceSweepResult {
  /** Removed sessions whose snapshots (and this host's copy) this sweep removed. */
  removed: number;
  /** Copies on this host of sessions that no longer exist, removed. */
  orphans: number;
}

/**
 * Removes what deleted sessions left of their workspaces: each removal queues the session in
 * `workspacesGone`, and exactly one worker takes it (ZREM decides) and removes its snapshots from
 * the store and its copy on its own host; every worker also removes, on its own host, the copies
 * of sessions that no longer exist (another host's removal, or one made while it was down).
 * Bounded per sweep; a removal that fails is queued again.
 */
export async function sweepWorkspaces(
  redis: Redis,
  keys: Keys,
  workspaces: Workspaces,
  root: string,
  warn: (message: string, error: unknown) => void,
): Promise<WorkspaceSweepResult> {
  const gone = lifecycleKeys(keys).workspacesGone;
  let removed = 0;
  const ids = await redis.zrange(gone, 0, GONE_PER_SWEEP - 1);
  for (const id of ids) {
    // One worker takes each entry.
    if ((await redis.zrem(gone, id)) !== 1) continue;
    try {
      await workspaces.remove(id);
      removed += 1;
    } catch (error) {
      warn(`the workspace of removed session ${id} was not removed (queued again)`, error);
      await redis.zadd(gone, Date.now(), id);
    }
  }
  let orphans = 0;
  // No root yet: no copies on this host.
  const names = await readdir(root).catch(() => [] as string[]);
  const local = names.filter((n) => SESSION_ID_PATTERN.test(n)).slice(0, LOCAL_PER_SWEEP);
  if (local.length > 0) {
    const pipeline = redis.pipeline();
    for (const id of local) pipeline.exists(keys.session(id, 'meta'));
    const replies = (await pipeline.exec()) ?? [];
    for (const [i, id] of local.entries()) {
      const [error, exists] = replies[i] ?? [null, 1];
      if (error !== null || exists !== 0) continue;
      try {
        await workspaces.remove(id);
        orphans += 1;
      } catch (failure) {
        warn(`the workspace copy of a removed session ${id} was not removed (tried again next sweep)`, failure);
      }
    }
  }
  return { removed, orphans };
}
