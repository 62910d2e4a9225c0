import type { Redis } from 'ioredis';
import type { BusEvent } from '../event-bus.ts';
import type { Keys } from '../keys.ts';
import type { SessionQueue } from '../queue.ts';
import { QUIESCENT_STATES, SESSION_STATES } from '../../../machines/states.ts';
import { activationsKey, lifecycleKeys, purgeKeys, sessionsKey } from './keys.ts';
import { shardOf } from '../keys.ts';
import { FORGET, MARK, PURGE } from './scripts.ts';
import { script } from '../redis/scripts.ts';
import { foldCounters } from '../counters.ts';
import { deletedEvent } from '../webhooks/deleted.ts';

/** Removed sessions whose workspaces wait to be removed from the store, at most (the oldest beyond are dropped). */
export const WORKSPACES_GONE_MAX = 100_000;

export interface RemoveDeps {
  redis: Redis;
  keys: Keys;
  queue: SessionQueue;
  publish: (event: BusEvent) => Promise<void>;
}

/**
 * force: cancel a running turn (its process tree gone) and remove the session whatever its state;
 * finished: remove it only if nothing runs, waits, backs off or is queued (else `active`);
 * expire: like finished, and only once its retention has run out (else `not_expired`).
 */
export type RemoveMode = 'force' | 'finished' | 'expire';

export interface RemoveOptions {
  mode: RemoveMode;
  /** Retention of sessions without their own (expire mode). */
  retentionMs?: number;
  /** How long a holder gets to stop the turn and let go before its lease is taken away (force). Default 15 s. */
  waitMs?: number;
  /** Keep a tombstone this long, so that deleting again says `already_removed`. Default 0 (none). */
  tombstoneMs?: number;
  /** Who asked (the deletion audit's actor), told in the `session.deleted` webhook event. */
  actor?: string;
  /** For crash tests: stop after this step, as a process killed there would. */
  stopAfter?: 'mark' | 'purge';
}

export type RemoveResult =
  | { outcome: 'removed'; sessionId: string; cancelled: boolean }
  | { outcome: 'unknown'; sessionId: string }
  | { outcome: 'already_removed'; sessionId: string }
  | { outcome: 'active'; sessionId: string; state: string }
  | { outcome: 'not_expired'; sessionId: string; expireAt: number }
  | { outcome: 'stopped'; sessionId: string };

/** A removal in progress, as the `purging` hash keeps it. */
export interface PurgeRecord {
  at: number;
  mode: RemoveMode;
  jobId?: string;
  /** When the session was marked (its fleet entries are those made before). */
  markedAt?: string;
  tombstoneMs?: number;
  /** The session's fleet-index shard (read at the mark; unknown before it: every shard is cleaned). */
  shard?: number;
  /** It had a workspace (a pointer in its agent state, read before the purge): its snapshots go after it. */
  workspace?: boolean;
  /** Who asked (RemoveOptions.actor), for the `session.deleted` event of a removal the sweeper finishes. */
  actor?: string;
}

/**
 * Removes one session, fleet-wide: every key of it, its message stream and agent state, its
 * activation job, its entries in the fleet indexes. Contract: restartable at every step (a
 * removal cut short is in the `purging` hash and the sweeper finishes it); never half a session:
 * PURGE removes all of its keys in one call; once marked, no prompt is accepted and no worker
 * activates it; a prompt that got in before the mark makes a non-forced removal refuse (`active`).
 */
export async function removeSession(
  deps: RemoveDeps,
  sessionId: string,
  options: RemoveOptions,
): Promise<RemoveResult> {
  const { redis, keys } = deps;
  const lk = lifecycleKeys(keys);
  const k = (part: Parameters<Keys['session']>[1]) => keys.session(sessionId, part);
  const started = Date.now();
  // Step 0: the removal is on record before anything is changed.
  const existing = await redis.hget(lk.purging, sessionId);
  const previous = existing === null ? null : (JSON.parse(existing) as PurgeRecord);
  // A removal cut short goes on in its own mode (an expiry still checks that the session expired), unless this one forces.
  const mode: RemoveMode = options.mode === 'force' || previous === null ? options.mode : previous.mode;
  const record: PurgeRecord = {
    ...(previous ?? {
      at: started,
      ...(options.tombstoneMs ? { tombstoneMs: options.tombstoneMs } : {}),
      ...(options.actor === undefined ? {} : { actor: options.actor }),
    }),
    mode,
  };
  if (previous === null || previous.mode !== mode) await redis.hset(lk.purging, sessionId, JSON.stringify(record));

  // Step 1: MARK. From here on the session takes no prompt and no activation.
  const mark = (await script(redis, 'sessiondLifecycleMark', MARK)(
    5,
    k('meta'),
    k('inbox'),
    k('lease'),
    k('cancel'),
    k('active'),
    mode,
    started,
    options.retentionMs ?? 0,
    QUIESCENT_STATES.join(','),
  )) as Array<number | string>;
  const code = Number(mark[0]);
  if (code === 0) {
    // Nothing under this id: a removal cut short after PURGE has only the fleet entries left.
    if (previous !== null) {
      await forget(deps, sessionId, previous.markedAt ?? '', previous.shard, previous.workspace === true);
      return { outcome: 'removed', sessionId, cancelled: false };
    }
    await redis.hdel(lk.purging, sessionId);
    return (await redis.exists(lk.tombstone(sessionId))) === 1
      ? { outcome: 'already_removed', sessionId }
      : { outcome: 'unknown', sessionId };
  }
  if (code === -1 || code === -2) {
    await redis.hdel(lk.purging, sessionId);
    return code === -1
      ? { outcome: 'active', sessionId, state: String(mark[1]) }
      : { outcome: 'not_expired', sessionId, expireAt: Number(mark[1]) };
  }
  const jobId = String(mark[1] ?? '') || previous?.jobId || '';
  const holder = String(mark[2] ?? '');
  const markedAt = String(mark[4] ?? '');
  const shard = shardOf(mark[5]);
  const marked: PurgeRecord = { ...record, ...(jobId === '' ? {} : { jobId }), markedAt, shard };
  await redis.hset(lk.purging, sessionId, JSON.stringify(marked));
  if (options.stopAfter === 'mark') return { outcome: 'stopped', sessionId };

  // Step 2: a holder stops the turn (its process tree gone) and lets go; past the wait, its lease is taken away.
  let cancelled = false;
  if (holder !== '') {
    cancelled = true;
    await deps.publish({ sessionId, kind: 'delete' });
    const deadline = Date.now() + (options.waitMs ?? 15_000);
    while ((await redis.exists(k('lease'))) === 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  }

  // Step 3: the activation job (a job a worker has just taken finds the session marked and ends).
  if (jobId !== '') await removeJob(deps.queue, jobId);

  // Step 4: its attempt and retry counters into the fleet totals (final now: no holder), then PURGE, every key of the session in one call.
  await foldCounters(redis, keys, sessionId);
  // Whether it had a workspace is on record before its keys go (a removal cut short after PURGE still knows).
  const workspace = (await redis.hexists(k('agent'), 'workspace')) === 1;
  if (workspace)
    await redis.hset(lk.purging, sessionId, JSON.stringify({ ...marked, workspace } satisfies PurgeRecord));
  // The session.deleted webhook event, recorded by PURGE with the removal itself (webhooks/deleted.ts).
  const event = await deletedEvent(redis, keys, sessionId, {
    mode,
    ...(record.actor === undefined ? {} : { actor: record.actor }),
  });
  const purgeArgs = [...purgeKeys(keys, sessionId), ...(event === null ? [] : event.keys)];
  const purged = Number(
    await script(redis, 'sessiondLifecyclePurge', PURGE)(
      purgeArgs.length,
      ...purgeArgs,
      '1',
      record.tombstoneMs ?? 0,
      Date.now(),
      ...(event === null ? [] : [event.id, event.body, event.keepTargetMs]),
    ),
  );
  if (event !== null && purged === 1) event.wrote();
  if (purged === -1) {
    await redis.hdel(lk.purging, sessionId);
    return { outcome: 'already_removed', sessionId };
  }
  if (options.stopAfter === 'purge') return { outcome: 'stopped', sessionId };

  // Step 5: the fleet-wide entries, and the record of this removal.
  await forget(deps, sessionId, markedAt, shard, workspace);
  return { outcome: 'removed', sessionId, cancelled };
}

/** The session's fleet-index entries (in its shard; every shard when it is not known), then its `purging` record. */
async function forget(
  deps: RemoveDeps,
  sessionId: string,
  markedAt: string,
  shard: number | undefined,
  workspace: boolean,
): Promise<void> {
  const { keys } = deps;
  const shards = shard !== undefined ? [shard] : Array.from({ length: await deps.queue.fleetShards() }, (_, n) => n);
  for (const n of shards) {
    const lk = lifecycleKeys(keys, n);
    const fleet = [
      sessionsKey(keys, n),
      activationsKey(keys, n),
      lk.finished,
      lk.states,
      lk.version,
      lk.changed,
      ...SESSION_STATES.map((s) => lk.byState(s)),
    ];
    await script(deps.redis, 'sessiondLifecycleForget', FORGET)(fleet.length, ...fleet, sessionId, markedAt);
  }
  // Its workspace's snapshots in the store and its copies on worker hosts go next (workspace-sweep.ts), also
  // when no worker runs workspaces now: the entry waits for one (bounded: WORKSPACES_GONE_MAX).
  if (workspace)
    await deps.redis
      .multi()
      .zadd(lifecycleKeys(keys).workspacesGone, Date.now(), sessionId)
      .zremrangebyrank(lifecycleKeys(keys).workspacesGone, 0, -WORKSPACES_GONE_MAX - 1)
      .exec();
  // What the counters' folds remembered of it (its totals stay), then the record of this removal.
  await deps.redis.hdel(lifecycleKeys(keys).folded, sessionId);
  await deps.redis.hdel(lifecycleKeys(keys).purging, sessionId);
}

async function removeJob(queue: SessionQueue, jobId: string): Promise<void> {
  for (let i = 0; i < 20; i += 1) {
    const job = await queue.getJob(jobId);
    if (job === undefined) return;
    try {
      await job.remove();
      return;
    } catch {
      // Locked by a worker that has just taken it: it finds the session marked, ends, and is removed on completion.
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
