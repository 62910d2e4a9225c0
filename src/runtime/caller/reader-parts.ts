import type { Redis } from 'ioredis';
import { InputError } from '../../errors.ts';
import { ApprovalStore } from '../approvals/store.ts';
import { fleetShardCounter } from '../fleet-shards.ts';
import { createKeys, SESSION_ID_PATTERN, type Keys } from '../keys.ts';
import { LIFECYCLE_DEFAULTS, type LifecycleLimits } from '../lifecycle/limits.ts';
import { SessionStore } from '../store/session-store.ts';

/** What a reader of sessions is made from: RuntimeOptions without what only writes need. */
export interface ReaderOptions {
  connect: (role: string) => Redis;
  prefix?: string;
  /** The deployment's retention and quotas (defaults: LIFECYCLE_DEFAULTS). */
  limits?: Partial<LifecycleLimits>;
  /** Partitions of the activation queue (SESSIOND_QUEUE_PARTITIONS, default 1): how many index shards to read. */
  queuePartitions?: number;
}

/**
 * What the read operations (session-view.ts) work with: one Redis connection for commands, the
 * session and approval stores, and the fleet index's shard count. No queue, no BullMQ, no policy:
 * `sessiond inspect` and `list` load only this (and a reader made by createReader needs no more).
 */
export interface ReaderParts {
  keys: Keys;
  redis: Redis;
  store: SessionStore;
  approvals: ApprovalStore;
  limits: LifecycleLimits;
  connect: (role: string) => Redis;
  /** How many fleet-index shards a listing merges (see fleet-shards.ts). */
  fleetShards(): Promise<number>;
}

export function readerParts(options: ReaderOptions): ReaderParts {
  const keys = createKeys(options.prefix ?? 'sessiond');
  const redis = options.connect('runtime');
  const limits = { ...LIFECYCLE_DEFAULTS, ...options.limits };
  return {
    keys,
    redis,
    store: new SessionStore(redis, keys, { retentionMs: limits.retentionMs }),
    approvals: new ApprovalStore(redis, keys),
    limits,
    connect: options.connect,
    fleetShards: fleetShardCounter(() => redis, keys, options.queuePartitions ?? 1),
  };
}

export function checkSessionId(sessionId: string): void {
  if (!SESSION_ID_PATTERN.test(sessionId))
    throw new InputError([
      {
        field: 'sessionId',
        message: `must be 1-100 letters, digits or _.-, and not . or .. (got ${JSON.stringify(sessionId)})`,
      },
    ]);
}

export function safeJson(raw: string | undefined): unknown {
  if (raw === undefined) return {};
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    // Written by sessiond as JSON, so only a hand-edited value fails here: it reads as empty ({}).
    return {};
  }
}
