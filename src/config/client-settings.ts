import {
  LIFECYCLE_DEFAULTS,
  QUEUE_DEFAULTS,
  SCHEDULE_DEFAULTS,
  defaultStateDir,
  type LifecycleLimits,
  type ScheduleLimits,
} from './defaults.ts';
import { PREFIX_PATTERN } from './raw.ts';
import { parseRedisTarget } from './redis-url.ts';
import type { Config } from './config.ts';
import type { LimitRule } from './limit-rules.ts';
import { DEFAULT_CALLER, type CallerIdentity } from './caller.ts';

/** What a client command (`inspect`, `list`, `enqueue`, …) needs of the configuration. */
export interface ClientSettings {
  redisUrl: string | undefined;
  prefix: string;
  stateDir: string;
  queuePartitions: number;
  lifecycle: LifecycleLimits;
  /** Bounds on schedules (config `schedules`). */
  schedules: ScheduleLimits;
  fleetLimits: readonly LimitRule[];
  /** The local caller's tenant and highest priority (config `caller`). */
  caller: CallerIdentity;
}

/** The fields a raw configuration may name and still be read without the schema. */
const PLAIN_FIELDS: ReadonlySet<string> = new Set(['redisUrl', 'prefix', 'stateDir']);

/**
 * The client settings of a raw configuration (raw.ts) that names nothing but `redisUrl`, `prefix`
 * and `stateDir`, each valid by the schema's own rule — the common case of an operator's shell —
 * without loading the schema (zod): for such an input the schema gives exactly these values
 * (test/config/client-settings.test.ts compares the two). Anything else is null: the caller then
 * loads the whole configuration (loadConfig), which checks every field and names a bad one.
 */
export function plainClientSettings(raw: Record<string, unknown>): ClientSettings | null {
  for (const [field, value] of Object.entries(raw))
    if (!PLAIN_FIELDS.has(field) || typeof value !== 'string') return null;
  const { redisUrl, prefix, stateDir } = raw as { redisUrl?: string; prefix?: string; stateDir?: string };
  if (redisUrl !== undefined && !parseRedisTarget(redisUrl).ok) return null;
  if (prefix !== undefined && !PREFIX_PATTERN.test(prefix)) return null;
  if (stateDir !== undefined && stateDir === '') return null;
  return {
    redisUrl,
    prefix: prefix ?? 'sessiond',
    stateDir: stateDir ?? defaultStateDir(),
    queuePartitions: QUEUE_DEFAULTS.partitions,
    lifecycle: { ...LIFECYCLE_DEFAULTS },
    schedules: { ...SCHEDULE_DEFAULTS },
    fleetLimits: [],
    caller: DEFAULT_CALLER,
  };
}

/** The client settings of a whole (checked) configuration. */
export function clientSettingsOf(config: Config): ClientSettings {
  const l = config.lifecycle;
  return {
    redisUrl: config.redisUrl,
    prefix: config.prefix,
    stateDir: config.stateDir,
    queuePartitions: config.queue.partitions,
    lifecycle: {
      retentionMs: l.retention,
      maxRetentionMs: l.maxRetention,
      maxQueuedPrompts: l.maxQueuedPrompts,
      maxLogMessages: l.maxLogMessages,
      maxArchiveBytes: l.maxArchiveBytes,
      maxArchiveLineBytes: l.maxArchiveLineBytes,
      maxLogBytes: l.maxLogBytes,
    },
    schedules: {
      maxSchedules: config.schedules.max,
      maxPerCaller: config.schedules.maxPerCaller,
      minIntervalMs: config.schedules.minInterval,
    },
    fleetLimits: config.limits,
    caller: config.caller,
  };
}
