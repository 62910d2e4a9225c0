/**
 * Every Redis key sessiond uses, under one configurable prefix. One session's
 * keys share the hash tag `{s:<id>}` so they live in one Redis Cluster slot and
 * a Lua script may touch them together; the fleet-wide keys share `{<prefix>}`;
 * BullMQ's keys share the tag `{<prefix>:q}` (`{<prefix>:q<n>}` for partition n).
 *
 * The fleet indexes that every session's writes touch (listing, state sets, activations, expiry,
 * `changed`, listing version) are sharded with the queue partitions: shard 0 is `{<prefix>}` (where
 * they were before shards), shard n > 0 lives in partition n's tag, `{<prefix>:q<n>}:idx:…`. A
 * session's shard is fixed when it is created (its meta's `shard` field; none: 0), so changing
 * the partition count moves nothing; readers merge every shard below the highest count recorded.
 * A new per-session fleet key: name it with `fleetKey(shard, name)`.
 */
/** 1-100 letters, digits or `_.-`, but not `.` or `..` (a path segment of the HTTP API). */
export const SESSION_ID_PATTERN = /^(?!\.{1,2}$)[A-Za-z0-9_.-]{1,100}$/;

export type SessionPart = 'meta' | 'snapshot' | 'inbox' | 'log' | 'seq' | 'lease' | 'fence' | 'cancel' | 'history' | 'agent' | 'active' | 'approvals';

export interface Keys {
  readonly prefix: string;
  session(sessionId: string, part: SessionPart): string;
  /** zset: sessionId → creation time. */
  readonly sessions: string;
  /** zset: sessionId → time its activation job was created (for the reconciler). */
  readonly activations: string;
  /** string: the global default retry policy (JSON). */
  readonly policy: string;
  /** hash: workerId → heartbeat JSON. */
  readonly workers: string;
  /** pub/sub channel of session events (prompt, cancel, policy). */
  readonly events: string;
  /** BullMQ's prefix (of partition 0, the only one with SESSIOND_QUEUE_PARTITIONS=1). */
  readonly queuePrefix: string;
  /** BullMQ's prefix of partition `n`: its own hash tag, so each partition is a slot of its own. */
  queuePartitionPrefix(n: number): string;
  /** string: the highest partition count the deployment has used (workers consume every partition below it). */
  readonly queuePartitions: string;
  /** The hash tag (and key prefix) of fleet-index shard `n`: `{<prefix>}` for 0, `{<prefix>:q<n>}:idx` (partition n's slot) otherwise. */
  fleetTag(n: number): string;
  /** A fleet-index key of shard `n` (shard 0: the unsharded key, `{<prefix>}:<name>`). */
  fleetKey(n: number, name: string): string;
}

export function createKeys(prefix: string): Keys {
  if (!/^[A-Za-z0-9_.:-]{1,64}$/.test(prefix)) throw new Error(`key prefix: must be 1-64 letters, digits or _.:- (got "${prefix}")`);
  return {
    prefix,
    session: (sessionId, part) => `${prefix}:{s:${sessionId}}:${part}`,
    // The fleet-wide keys share the tag `{<prefix>}`: one slot, so they may go in one MULTI.
    sessions: `{${prefix}}:sessions`,
    activations: `{${prefix}}:activations`,
    policy: `{${prefix}}:policy`,
    workers: `{${prefix}}:workers`,
    events: `${prefix}:events`,
    queuePrefix: `{${prefix}:q}`,
    // Partition 0 keeps the prefix of an unpartitioned queue: going from 1 to N partitions strands nothing.
    queuePartitionPrefix: (n) => (n === 0 ? `{${prefix}:q}` : `{${prefix}:q${n}}`),
    queuePartitions: `{${prefix}}:queue-partitions`,
    fleetTag: (n) => fleetTag(prefix, n),
    fleetKey: (n, name) => `${fleetTag(prefix, n)}:${name}`,
  };
}

function fleetTag(prefix: string, n: number): string {
  return n === 0 ? `{${prefix}}` : `{${prefix}:q${n}}:idx`;
}

/** A meta `shard` field (or a script's reply of it) as a shard number: none, '' or junk is 0. */
export function shardOf(value: unknown): number {
  const n = Number(value ?? 0);
  return Number.isSafeInteger(n) && n > 0 ? n : 0;
}
