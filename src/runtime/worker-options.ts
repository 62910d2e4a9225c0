import type { Redis } from 'ioredis';
import type { WebhookSettings } from './webhooks/outbox.ts';
import type { DeploymentPolicy } from '../policy/index.ts';
import type { AttemptLimits } from '../process/index.ts';
import type { ActiveSessionConfig } from './session-loop/active-session.ts';
import type { Tracing } from './tracing/tracing.ts';
import type { Keys } from './keys.ts';
import type { SessionQueue } from './queue.ts';
import type { LimitRule } from './limits/index.ts';
import type { WorkspaceConfig } from '../workspace/index.ts';
import type { LifecycleLimits } from './lifecycle/limits.ts';

export interface WorkerOptions {
  /** Creates a new Redis connection (the worker needs several: commands, pub/sub, BullMQ's blocking one). */
  connect: (role: string) => Redis;
  keys: Keys;
  queue: SessionQueue;
  concurrency: number;
  leaseTtlMs: number;
  /** BullMQ's stalled-job check; a dead worker's sessions are taken over within about leaseTtlMs + this (see self-fence.ts). */
  stalledIntervalMs: number;
  holdBackoffMs: number;
  pollMs: number;
  heartbeatMs: number;
  agentOptions: ActiveSessionConfig['agentOptions'];
  /**
   * The agents this worker runs (its heartbeat's `agents`): a session whose next attempt needs another
   * one is handed back, waiting for a worker that offers it. Default: every registered agent (built-in
   * and library-defined) and the `acp:` ones of agentOptions.
   */
  agents?: readonly string[];
  /** What callers may choose; every stored request is checked against it again at each attempt. Default: the default policy, this process's cwd as the workspace. */
  policy?: DeploymentPolicy;
  /** Ceilings of each attempt's cgroup, where the host has cgroup containment. */
  limits?: AttemptLimits;
  /** Finished sessions are removed this long after they finished (0: kept forever). Default 0. */
  retentionMs?: number;
  /** How often the lifecycle sweeper runs (retention, removals cut short). @default SWEEP_INTERVAL_MS (10 s) */
  sweepIntervalMs?: number;
  /** A removal on record this long was cut short: the sweeper finishes it. Default 60 s. */
  sweepResumeAfterMs?: number;
  /** Messages one session's log may hold; the turn that reaches it ends failed (`quota`). 0: no limit. */
  maxLogMessages?: number;
  /** Bytes of message content one session's log may hold; as maxLogMessages. @default LIFECYCLE_DEFAULTS.maxLogBytes (64 MiB) */
  maxLogBytes?: number;
  /**
   * The queue partitions this worker takes jobs from (SESSIOND_QUEUE_PARTITIONS_CONSUMED). Default:
   * every partition below the highest count the deployment has used, so that a partition a smaller
   * count no longer fills is still emptied.
   */
  consumePartitions?: readonly number[];
  /** Fenced writes wait for this many replicas (Redis WAIT, SESSIOND_REDIS_WAIT_REPLICAS); 0: no wait. */
  waitReplicas?: number;
  waitTimeoutMs?: number;
  /** Fleet-wide limits (SESSIOND_LIMITS): an attempt under one waits, parked, for capacity. Default none. */
  fleetLimits?: readonly LimitRule[];
  /** Operator webhooks (SESSIOND_WEBHOOKS): events recorded in the outbox with their transitions; this worker delivers too (webhooks/outbox.ts). */
  webhooks?: WebhookSettings;
  /** How often a session waiting for a limit looks again by itself: only a safety net, a release (or a lapsed hold, found every leaseTtlMs/3) wakes it. Default 30 s. */
  limitPollMs?: number;
  log?: (level: 'info' | 'warn' | 'error', message: string, fields?: Record<string, unknown>) => void;
  /**
   * Egress by policy (src/process/egress): each attempt's network goes through a proxy of this worker
   * that lets it reach its model host and the policy's `network` hosts only, and its provider key stays
   * here (brokered). Refusals are audited (`log`, `msg: "audit"`) and counted. Default true.
   */
  egress?: boolean;
  /** Told when a turn ends and when an attempt fails (src/api/worker.ts). */
  events?: ActiveSessionConfig['events'];
  /**
   * Per-session workspaces (docs/workspaces.md): a session whose caller names no cwd gets its own
   * files, recorded after every tool call and restored on any host. Absent: sessions run in their cwd.
   */
  workspaces?: WorkspaceConfig;
  /** Fire the deployment's schedules (src/runtime/schedules/): any worker takes a given firing. Default true. */
  schedules?: boolean;
  /** The caller's limits a schedule's firing obeys as an enqueue (maxQueuedPrompts, maxRetentionMs…). Default LIFECYCLE_DEFAULTS. */
  callerLimits?: Partial<LifecycleLimits>;
  /** Traces of turns and attempts. Default: OpenTelemetry over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT is set, none otherwise (see tracing/tracing.ts). */
  tracing?: Tracing | null;
}
