import type { Redis } from 'ioredis';
import type { SessionContext } from '../../../machines/types.ts';
import type { DeploymentPolicy } from '../../policy/index.ts';
import type { RetryPolicy } from '../../retry/index.ts';
import type { StoredApproval } from '../approvals/store.ts';
import type { LifecycleLimits } from '../lifecycle/limits.ts';
import type { LimitStatus } from '../limits/fleet-limits.ts';
import type { LimitRule } from '../limits/match.ts';
import type { TurnPrompt } from '../turn-prompts.ts';
import type { SessionUsage } from '../usage/usage.ts';
import type { WorkspaceConfig } from '../../workspace/types.ts';
import type { ScheduleLimits } from '../../config/defaults.ts';

/** A prompt waiting for its turn, in the order the turns will run. */
export interface QueuedPrompt {
  position: number;
  id: string;
  text: string;
  enqueuedAt: number | null;
  /** In the holder's mailbox (read from the inbox already) or still in the inbox. */
  where: 'mailbox' | 'inbox';
  retryOf?: number;
}

/** A session as stored (its machine context raw): what the runtime reads; callers see `SessionView` (src/runtime/inspect.ts). */
export interface SessionRecord {
  sessionId: string;
  state: string;
  createdAt: number;
  updatedAt: number;
  agent: string;
  options: Record<string, unknown>;
  policyOverride: RetryPolicy | null;
  context: SessionContext | null;
  /** Prompts enqueued but not yet taken by the session's actor. */
  queued: Array<{ id: string; text: string; enqueuedAt: number }>;
  /** Steers (whenBusy "steer") accepted for the running turn and not delivered yet, oldest first. */
  steers: Array<{ id: string; text: string; acceptedAt: number }>;
  /** A transition that started a turn carries its prompt (see turn-prompts.ts). */
  history: Array<{ at: number; from: string; to: string; event: string; prompt?: TurnPrompt }>;
  lastSeq: number;
  heldBy: string | null;
  cancelRequested: boolean;
  /** The permission requests of the session's current turn (decided ones included). */
  approvals: StoredApproval[];
  /** Token usage summed per session, latest turn and attempt (null: none reported yet). */
  usage: SessionUsage | null;
  /** The session's own webhook URL (`webhook` of enqueue; its secret is not kept here); null: none. */
  webhook: string | null;
}

export interface WorkerHeartbeat {
  id: string;
  host: string;
  pid: number;
  lastSeen: number;
  active: number;
  /** How the worker contains its attempts' processes (absent from workers older than this field). */
  containment?: { mode: 'cgroup' | 'sweep'; detail: string };
  /** The worker's sandbox (absent from workers older than this field): `refused`: the mode asked for is unavailable, attempts fail. */
  sandbox?: { mode: 'bwrap' | 'landlock' | 'none'; detail: string; gaps: string[]; refused: boolean };
  /** The queue partitions it consumes (absent from workers older than this field). */
  partitions?: number[];
  /** Its slots (absent from workers older than this field). */
  concurrency?: number;
  /** The agents it can run: the built-in ones, its library agents and its `acp:<name>` ones (absent from workers older than this field). */
  agents?: string[];
}

export interface RuntimeOptions {
  connect: (role: string) => Redis;
  prefix?: string;
  /**
   * What callers may choose (src/policy), or a function giving it on first use (it is needed by
   * enqueue, not by reads); default: the default policy with this process's cwd as the workspace.
   */
  policy?: DeploymentPolicy | (() => Promise<DeploymentPolicy>);
  /** The deployment's retention and quotas (defaults: LIFECYCLE_DEFAULTS). */
  limits?: Partial<LifecycleLimits>;
  /** Partitions of the activation queue (SESSIOND_QUEUE_PARTITIONS, default 1). */
  queuePartitions?: number;
  /** The fleet-wide limits the workers enforce (SESSIOND_LIMITS), for status and pausing by name. */
  fleetLimits?: readonly LimitRule[];
  /** Bounds on schedules (config `schedules`; defaults: SCHEDULE_DEFAULTS). */
  schedules?: Partial<ScheduleLimits>;
  /** The deployment's workspaces (root, store, exclude list, quotas): what a caller does with a session's workspace (export, import, fork, diff). */
  workspaces?: WorkspaceConfig;
}

/** A fleet limit as operators see it: its rule and each of its keys in use. */
export interface FleetLimitView {
  name: string;
  match: LimitRule['match'];
  maxConcurrent: number | null;
  maxStartsPerMinute: number | null;
  maxTokensPerMinute: number | null;
  paused: boolean;
  inUse: number;
  waiting: number;
  keys: LimitStatus[];
}
