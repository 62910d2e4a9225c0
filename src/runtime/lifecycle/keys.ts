import { SESSION_STATES } from '../../../machines/states.ts';
import type { Keys, SessionPart } from '../keys.ts';

/**
 * Every part of a session's keys: a removal deletes exactly these (one hash tag, one slot).
 * A new part added to SessionPart must be added here, or deleted sessions would leave it behind
 * (test/runtime/lifecycle/delete.test.ts scans for leftovers).
 */
export const SESSION_PARTS = [
  'meta',
  'snapshot',
  'inbox',
  'log',
  'seq',
  'lease',
  'fence',
  'cancel',
  'history',
  'agent',
  'active',
  'approvals',
  'counters',
  'steers',
] as const satisfies readonly SessionPart[];

/**
 * The fleet-wide keys of the lifecycle. `lifecycleKeys(keys, n)` names those of index shard n (see
 * keys.ts): finished, states, byState, version and changed are per shard; purging, sweeper, deletions,
 * backfill, counters and counters-folded exist in shard 0 only (`{<prefix>}`: per removal or per sweep, not per write).
 */
export interface LifecycleKeys {
  /** hash: sessionId → JSON of a removal in progress (a crash leaves it for the sweeper to finish). */
  readonly purging: string;
  /** zset: sessionId → when the finished session expires (ms). */
  readonly finished: string;
  /** hash: sessionId → its state, as last indexed. */
  readonly states: string;
  /** zset per state: sessionId → creation time. */
  byState(state: string): string;
  /** string: the number of the last change to the listing (for ETags). */
  readonly version: string;
  /** zset: sessionId → when it last changed (state, prompts); only the last hour is kept (metrics read what changed). */
  readonly changed: string;
  /** string: the sweeper's lock (one sweeper at a time, fleet-wide). */
  readonly sweeper: string;
  /** stream: one entry per deletion (who, when, outcome), capped at AUDIT_MAX entries. */
  readonly deletions: string;
  /** string: the ZSCAN cursor of the backfill of sessions stored before these indexes existed; `done` once it has run through. */
  readonly backfill: string;
  /** hash: counter → fleet-wide total (attempts and retries, folded in from the sessions' own `counters`; see metrics/counters.ts). */
  readonly counters: string;
  /** hash: sessionId → JSON of its counters already added to the totals (a fold adds only what is new). */
  readonly folded: string;
  /** string per session, with a TTL: it was deleted a moment ago (a second delete is not an error). */
  tombstone(sessionId: string): string;
  /** zset: sessionId → when it was removed; a worker with workspaces removes its snapshots from the store (docs/workspaces.md). */
  readonly workspacesGone: string;
  /** string per host and local store (`<this>:<hash>`), with a TTL: that store was compacted lately (workspace-sweep.ts). */
  readonly workspaceCompact: string;
}

export function lifecycleKeys(keys: Keys, shard = 0): LifecycleKeys {
  const fleet = keys.fleetTag(shard);
  const zero = keys.fleetTag(0);
  return {
    purging: `${zero}:purging`,
    finished: `${fleet}:finished`,
    states: `${fleet}:states`,
    byState: (state) => `${fleet}:state:${state}`,
    version: `${fleet}:listing-version`,
    changed: `${fleet}:changed`,
    sweeper: `${zero}:sweeper`,
    backfill: `${zero}:index-backfill`,
    deletions: `${zero}:deletions`,
    counters: `${zero}:counters`,
    folded: `${zero}:counters-folded`,
    tombstone: (sessionId) => `${keys.prefix}:{s:${sessionId}}:gone`,
    workspacesGone: `${zero}:workspaces-gone`,
    workspaceCompact: `${zero}:workspace-compact`,
  };
}

/** The deletion audit stream keeps about this many entries (XADD MAXLEN ~). */
export const AUDIT_MAX = 10_000;

/** How long the `changed` index remembers a change. */
export const CHANGED_WINDOW_MS = 3_600_000;

/** The session's keys in the order PURGE wants them: meta, lease, the others, then the tombstone. */
export function purgeKeys(keys: Keys, sessionId: string): string[] {
  const rest = SESSION_PARTS.filter((p) => p !== 'meta' && p !== 'lease');
  return [
    keys.session(sessionId, 'meta'),
    keys.session(sessionId, 'lease'),
    ...rest.map((p) => keys.session(sessionId, p)),
    lifecycleKeys(keys).tombstone(sessionId),
  ];
}

/** The listing of index shard n (zset: sessionId → creation time). */
export function sessionsKey(keys: Keys, shard: number): string {
  return shard === 0 ? keys.sessions : keys.fleetKey(shard, 'sessions');
}

/** The activations of index shard n, for the reconciler (zset: sessionId → when its activation was created). */
export function activationsKey(keys: Keys, shard: number): string {
  return shard === 0 ? keys.activations : keys.fleetKey(shard, 'activations');
}

/** INDEX's KEYS (see store/scripts.ts) for index shard n, and its first argument, the states' names in the order of their sets. */
export function indexScriptKeys(keys: Keys, shard = 0): { keys: string[]; states: string } {
  const lk = lifecycleKeys(keys, shard);
  return {
    keys: [
      sessionsKey(keys, shard),
      activationsKey(keys, shard),
      lk.finished,
      lk.states,
      lk.version,
      lk.changed,
      ...SESSION_STATES.map((s) => lk.byState(s)),
    ],
    states: SESSION_STATES.join(','),
  };
}
