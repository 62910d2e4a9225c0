import { createHash } from 'node:crypto';
import { readdir, rm, stat } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { isLocalStore } from '../../workspace/layout.ts';
import type { WorkspaceConfig, Workspaces } from '../../workspace/types.ts';
import type { Keys } from '../keys.ts';
import { SESSION_ID_PATTERN } from '../keys.ts';
import { lifecycleKeys } from './keys.ts';

/** Removed sessions taken per sweep, at most (the rest go at the next sweeps). */
const GONE_PER_SWEEP = 100;
/** Local copies looked at per sweep, at most. */
const LOCAL_PER_SWEEP = 1000;
/** A local store is compacted (packed, unreachable objects pruned) at most this often. */
export const STORE_COMPACT_EVERY_MS = 24 * 3_600_000;
/**
 * Unreachable objects younger than this stay: a snapshot's objects are unreachable until its index
 * moves (seconds), and a removal's only matter for a day.
 */
export const STORE_PRUNE_GRACE_MS = 24 * 3_600_000;
/**
 * A session's git data on this host whose session does not exist is left this long after it last
 * changed: an import or a fork writes it (the caller's) before it writes the session.
 */
export const GIT_DATA_GRACE_MS = 3_600_000;

export interface WorkspaceSweepResult {
  /** Removed sessions whose snapshots (and this host's copy) this sweep removed. */
  removed: number;
  /** Copies on this host of sessions that no longer exist, removed (with their git data, the workers' or the callers'). */
  orphans: number;
  /** This sweep compacted the local store (at most once per STORE_COMPACT_EVERY_MS per host and store). */
  compacted: boolean;
}

/**
 * Removes what deleted sessions left of their workspaces: each removal queues the session in
 * `workspacesGone`, and exactly one worker takes it (ZREM decides) and removes its snapshots from
 * the store and its copy on its own host; every worker also removes, on its own host, the copies
 * of sessions that no longer exist (another host's removal, or one made while it was down).
 * Bounded per sweep; a removal that fails is queued again. A local store is then compacted at
 * most once a day (per host and store path, a Redis key with a TTL deciding; git's `gc.pid` lock
 * keeps two hosts sharing one store path from running at once): removed sessions' objects do not
 * stay in it for ever, nor do those of a removal that raced a snapshot (compact's `exists`).
 */
export async function sweepWorkspaces(
  redis: Redis,
  keys: Keys,
  workspaces: Workspaces,
  config: Pick<WorkspaceConfig, 'root' | 'gitDir' | 'store'>,
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
  // Copies, and the workers' git data without a copy (a copy removed by hand, a removal cut short):
  // removed with the session's snapshots. The callers' git data (exports, imports, forks, diffs), which
  // no removal reaches, after them.
  const local = new Set([
    ...(await sessionDirs(config.root, 0)),
    ...(await sessionDirs(join(config.gitDir, 'sessions'), GIT_DATA_GRACE_MS)),
  ]);
  for (const id of await missing(redis, keys, [...local])) {
    try {
      await workspaces.remove(id);
      orphans += 1;
    } catch (failure) {
      warn(`the workspace of a removed session ${id} on this host was not removed (tried again next sweep)`, failure);
    }
  }
  const callers = join(config.gitDir, 'callers', 'sessions');
  for (const id of await missing(redis, keys, await sessionDirs(callers, GIT_DATA_GRACE_MS))) {
    try {
      await rm(join(callers, id), { recursive: true, force: true });
      orphans += 1;
    } catch (failure) {
      warn(`a caller's git data of a removed session ${id} was not removed (tried again next sweep)`, failure);
    }
  }
  return { removed, orphans, compacted: await compactStore(redis, keys, workspaces, config.store) };
}

/** Session ids named by `dir`'s entries (none when it does not exist), at most LOCAL_PER_SWEEP, each unchanged for `graceMs`. */
async function sessionDirs(dir: string, graceMs: number): Promise<string[]> {
  // No such directory yet: nothing of any session on this host.
  const names = await readdir(dir).catch(() => [] as string[]);
  const ids = names.filter((n) => SESSION_ID_PATTERN.test(n)).slice(0, LOCAL_PER_SWEEP);
  if (graceMs === 0) return ids;
  const now = Date.now();
  const old = await Promise.all(
    ids.map(async (id) => {
      // Gone meanwhile: nothing left to remove.
      const info = await stat(join(dir, id)).catch(() => null);
      return info !== null && now - info.mtimeMs >= graceMs;
    }),
  );
  return ids.filter((_, i) => old[i] === true);
}

/** Those of `ids` whose session does not exist; a reply that failed counts as existing (nothing removed on a doubt). */
async function missing(redis: Redis, keys: Keys, ids: readonly string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const pipeline = redis.pipeline();
  for (const id of ids) pipeline.exists(keys.session(id, 'meta'));
  const replies = (await pipeline.exec()) ?? [];
  return ids.filter((_, i) => {
    const [error, exists] = replies[i] ?? [null, 1];
    return error === null && exists === 0;
  });
}

/** Compacts a local store when no worker of this host did in the last STORE_COMPACT_EVERY_MS. */
async function compactStore(redis: Redis, keys: Keys, workspaces: Workspaces, store: string): Promise<boolean> {
  if (!isLocalStore(store)) return false;
  const which = createHash('sha256').update(`${hostname()}\0${store}`).digest('hex').slice(0, 16);
  const key = `${lifecycleKeys(keys).workspaceCompact}:${which}`;
  if ((await redis.set(key, String(Date.now()), 'PX', STORE_COMPACT_EVERY_MS, 'NX')) !== 'OK') return false;
  return workspaces.compact(STORE_PRUNE_GRACE_MS, async (ids) => {
    const gone = new Set(await missing(redis, keys, ids));
    return ids.map((id) => !gone.has(id));
  });
}
