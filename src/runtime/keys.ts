/**
 * Every Redis key sessiond uses, under one configurable prefix. One session's
 * keys share the hash tag `{s:<id>}` so they live in one Redis Cluster slot and
 * a Lua script may touch them together; the fleet-wide keys share `{<prefix>}`;
 * BullMQ's keys share the tag `{<prefix>:q}` (`{<prefix>:q<n>}` for partition n).
 *
 * The fleet indexes that every session's writes touch (listing, state sets, activations, expiry,
 * `changed`, listing version) are sharded with the queue partitions: shard 0 is `{<prefix>}` (where
 * they were before shards, and where they stay with one partition), shard n + 1 lives in partition
 * n's tag, `<tag>:idx:…`. A session's shard is fixed when it is created (its meta's `shard` field;
 * none: 0), so changing the partition count moves nothing; readers merge shard 0 and those of every
 * partition below the highest count recorded.
 * A new per-session fleet key: name it with `fleetKey(shard, name)`.
 */
/** 1-100 letters, digits or `_.-`, but not `.` or `..` (a path segment of the HTTP API). */
import { keySlot, SLOTS } from './redis/slot.ts';

export const SESSION_ID_PATTERN = /^(?!\.{1,2}$)[A-Za-z0-9_.-]{1,100}$/;

export type SessionPart =
  | 'meta'
  | 'snapshot'
  | 'inbox'
  | 'log'
  | 'seq'
  | 'lease'
  | 'fence'
  | 'cancel'
  | 'history'
  | 'agent'
  | 'active'
  | 'approvals'
  | 'counters'
  | 'steers';

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
  /** The hash tag (and key prefix) of fleet-index shard `n`: `{<prefix>}` for 0, `<tag of partition n − 1>:idx` (that partition's slot) otherwise. */
  fleetTag(n: number): string;
  /** A fleet-index key of shard `n` (shard 0: the unsharded key, `{<prefix>}:<name>`). */
  fleetKey(n: number, name: string): string;
}

export function createKeys(prefix: string): Keys {
  if (!/^[A-Za-z0-9_.:-]{1,64}$/.test(prefix))
    throw new Error(`key prefix: must be 1-64 letters, digits or _.:- (got "${prefix}")`);
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
    queuePartitionPrefix: (n) => partitionTag(prefix, n),
    queuePartitions: `{${prefix}}:queue-partitions`,
    fleetTag: (n) => fleetTag(prefix, n),
    fleetKey: (n, name) => `${fleetTag(prefix, n)}:${name}`,
  };
}

function fleetTag(prefix: string, n: number): string {
  return n === 0 ? `{${prefix}}` : `${partitionTag(prefix, n - 1)}:idx`;
}

/**
 * Where each partition's slot goes: partition n lands in the sixth of the slot space given by
 * SIXTHS[n mod 6], counted from partition 0's own sixth (its tag, `{<prefix>:q}`, is fixed). Every
 * 6 consecutive partitions take every sixth once, so with a multiple of 6 partitions on 2, 3 or 6
 * masters holding equal slot ranges (as `redis-cli --cluster create` makes them), each master
 * holds as many partitions as any other, whatever the prefix; the first 2, 3 and 4 of them are
 * spread over halves and thirds too when partition 0 sits in sixth 0.
 */
const SIXTHS = [0, 4, 2, 3, 1, 5] as const;
const SIXTH = SLOTS / 6;

const tags = new Map<string, string>();

/**
 * Partition n's hash tag: `{<prefix>:q}` for 0; for n > 0 `{<prefix>:q<n>}`, or `{<prefix>:q<n>.<salt>}`
 * with the smallest salt that puts its slot in the middle half of its sixth (see SIXTHS). A pure
 * function of the prefix and n: every process names the same queues.
 */
export function partitionTag(prefix: string, n: number): string {
  if (n === 0) return `{${prefix}:q}`;
  const known = tags.get(`${prefix}\n${n}`);
  if (known !== undefined) return known;
  const base = Math.floor(keySlot(`{${prefix}:q}`) / SIXTH);
  const sixth = (base + (SIXTHS[n % 6] as number)) % 6;
  const from = (sixth + 0.25) * SIXTH;
  const to = (sixth + 0.75) * SIXTH;
  let tag = `{${prefix}:q${n}}`;
  for (let salt = 1; !(keySlot(tag) >= from && keySlot(tag) < to); salt += 1) tag = `{${prefix}:q${n}.${salt}}`;
  if (tags.size > 4096) tags.clear();
  tags.set(`${prefix}\n${n}`, tag);
  return tag;
}

/** A meta `shard` field (or a script's reply of it) as a shard number: none, '' or junk is 0. */
export function shardOf(value: unknown): number {
  const n = Number(value ?? 0);
  return Number.isSafeInteger(n) && n > 0 ? n : 0;
}
