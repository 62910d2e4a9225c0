/**
 * Every option default of sessiond, in one place: the config schema (config.ts) and the
 * runtime's constructors (SessionWorker, Runtime) read them from here, so the two cannot drift.
 * Durations are in milliseconds.
 */
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** A worker's options (config `worker.*`, `SessionWorker` options). */
export const WORKER_DEFAULTS = {
  /**
   * Sessions a worker drives at once.
   * @default 4
   */
  concurrency: 4,
  /**
   * A session's lease (and its BullMQ job lock), renewed four times per TTL; a holder that cannot renew it
   * stops its agent a tenth of it (at least 200 ms) before it may lapse (self-fencing). A dead or cut-off
   * worker's sessions are taken over within about leaseTtlMs + stalledIntervalMs.
   * @default 2_000 (2 s)
   */
  leaseTtlMs: 2 * SECOND,
  /**
   * BullMQ's stalled-job check (one check per interval fleet-wide, whichever worker comes first; the
   * others' calls return at once): a dead worker's job is handed out again at the first check after its lock lapsed.
   * @default 500 (0.5 s)
   */
  stalledIntervalMs: SECOND / 2,
  /**
   * A backoff longer than this gives the worker slot back (the job waits in BullMQ's delayed set).
   * @default 2_000 (2 s)
   */
  holdBackoffMs: 2 * SECOND,
  /**
   * How often a holder looks at the inbox and the cancel flag even without a pub/sub event.
   * @default 1_000 (1 s)
   */
  pollMs: SECOND,
  /**
   * How often a worker writes its heartbeat.
   * @default 5_000 (5 s)
   */
  heartbeatMs: 5 * SECOND,
} as const;

/** How long `close()` / SIGTERM lets running attempts go on before stopping them. @default 10_000 (10 s) */
export const SHUTDOWN_GRACE_MS = 10 * SECOND;

/** How often the lifecycle sweeper runs (retention, removals cut short). @default 10_000 (10 s) */
export const SWEEP_INTERVAL_MS = 10 * SECOND;

/** The ceilings of one attempt (its cgroup, where the host has one) and its idle timeout. */
export const ATTEMPT_DEFAULTS = {
  /**
   * pids.max of each attempt's cgroup (0: none).
   * @default 4096
   */
  pidsMax: 4096,
  /**
   * memory.max of each attempt's cgroup in MiB (0: none).
   * @default 0
   */
  memoryMaxMb: 0,
  /**
   * No output line for this long stops the attempt (`terminal.failed`, category `timeout`).
   * @default 600_000 (10 min)
   */
  idleTimeoutMs: 10 * MINUTE,
} as const;

/**
 * The deployment's limits on what sessions keep: set by the operator (config), never by a caller.
 * A caller may choose a session's retention at enqueue, within `maxRetentionMs`.
 */
export interface LifecycleLimits {
  /** A finished session is removed this long after it finished; 0 keeps sessions forever. */
  retentionMs: number;
  /** The longest retention a caller may ask for a session (0: no maximum, `0` = forever allowed). */
  maxRetentionMs: number;
  /** Prompts waiting in one session (not yet taken into a turn) at most. */
  maxQueuedPrompts: number;
  /** Messages stored in one session's log at most: the turn that reaches it ends failed (`quota`), later prompts are refused. */
  maxLogMessages: number;
  /** The largest archive an import reads (bytes): a larger one is refused, naming the limit. */
  maxArchiveBytes: number;
  /** The longest line of an archive (bytes): a longer one is refused, naming the line and the limit. */
  maxArchiveLineBytes: number;
  /** Bytes of message content stored in one session's log at most: as maxLogMessages, measured in bytes. */
  maxLogBytes: number;
}

/** The deployment's limits on what sessions keep (config `lifecycle.*`, `Runtime` limits). */
export const LIFECYCLE_DEFAULTS = {
  /**
   * A finished session is removed this long after it finished (0: kept forever).
   * @default 2_592_000_000 (30 days)
   */
  retentionMs: 30 * DAY,
  /**
   * The longest retention a caller may ask for a session.
   * @default 31_536_000_000 (365 days)
   */
  maxRetentionMs: 365 * DAY,
  /**
   * Prompts waiting in one session at most.
   * @default 100
   */
  maxQueuedPrompts: 100,
  /**
   * Messages stored in one session's log at most.
   * @default 100_000
   */
  maxLogMessages: 100_000,
  /**
   * The largest archive `sessiond import` reads, in bytes.
   * @default 268_435_456 (256 MiB)
   */
  maxArchiveBytes: 256 * 1024 * 1024,
  /**
   * The longest line of an archive (a message, an agent's state), in bytes.
   * @default 16_777_216 (16 MiB)
   */
  maxArchiveLineBytes: 16 * 1024 * 1024,
  /**
   * Bytes of message content stored in one session's log at most (64 MiB): with a token's
   * maxSessions, what one caller can make Redis hold is bounded.
   * @default 67_108_864
   */
  maxLogBytes: 64 * 1024 * 1024,
} as const;

/** Per-session workspaces (config `workspaces.*`, docs/workspaces.md). */
export const WORKSPACE_DEFAULTS = {
  /**
   * Sessions without a caller-named cwd get a workspace of their own (off: they run in `workspace`, as before).
   * On, a worker needs a usable `git` on its host: it refuses to start without one.
   * @default true
   */
  enabled: true,
  /**
   * Untracked files matching these (gitignore syntax) are never snapshotted or shipped.
   * @default [".env*", "*.pem", "id_*"]
   */
  exclude: ['.env*', '*.pem', 'id_*'] as readonly string[],
  /**
   * Most bytes of one workspace's files a snapshot accepts (0: no limit): over it the turn fails, category `quota`.
   * @default 1_073_741_824 (1 GiB)
   */
  maxBytes: 1024 * 1024 * 1024,
  /**
   * Most snapshots kept per session (0: no limit): over it the turn fails, category `quota`.
   * @default 10_000
   */
  maxSnapshots: 10_000,
};

/**
 * Where a host's workspaces live by default, under sessiond's state dir (the CLI's `stateDir`, a
 * library worker's $SESSIOND_STATE_DIR): the working copies, sessiond's own git data (never inside
 * the root), and the snapshot store, a local bare repository (one host).
 */
export function workspacePaths(stateDir: string): { root: string; gitDir: string; store: string } {
  return {
    root: resolve(join(stateDir, 'workspaces')),
    gitDir: resolve(join(stateDir, 'workspace-git')),
    store: resolve(join(stateDir, 'workspace-store.git')),
  };
}

/** Bounds on schedules (config `schedules.*`, src/runtime/schedules/). */
export interface ScheduleLimits {
  /** Schedules the deployment holds at most. */
  maxSchedules: number;
  /** Schedules one caller (a token, or `local`) holds at most. */
  maxPerCaller: number;
  /** The shortest time between two firings of a schedule. */
  minIntervalMs: number;
}

export const SCHEDULE_DEFAULTS: ScheduleLimits = {
  /**
   * Schedules the deployment holds at most.
   * @default 1000
   */
  maxSchedules: 1000,
  /**
   * Schedules one caller (a token, or `local`) holds at most.
   * @default 100
   */
  maxPerCaller: 100,
  /**
   * The shortest time between two firings of a schedule.
   * @default 60_000 (1 min)
   */
  minIntervalMs: MINUTE,
};

/** The activation queue (config `queue.*`). */
export const QUEUE_DEFAULTS = {
  /**
   * Partitions of the activation queue (BullMQ queues, each its own hash tag).
   * @default 1
   */
  partitions: 1,
} as const;

/**
 * Where sessiond keeps its local state (config `stateDir`): a redis-server it started, pi's session files.
 * @default $XDG_STATE_HOME/sessiond, else ~/.local/state/sessiond
 */
export function defaultStateDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(env.XDG_STATE_HOME || join(homedir(), '.local', 'state'), 'sessiond');
}

/** What an API token may do when its entry does not say (config `http.tokens[]`; docs/security.md). */
export const TOKEN_DEFAULTS = {
  /**
   * The highest priority a token's requests may ask for.
   * @default 0
   */
  maxPriority: 0,
  /**
   * Sessions created with one token that exist at once.
   * @default 10_000
   */
  maxSessions: 10_000,
  /**
   * Live event streams one token holds on one server (of http.maxStreams).
   * @default 100
   */
  maxStreams: 100,
  /**
   * The local caller's tenant (config `caller.tenant`: the CLI, the HTTP API with no token, SESSIOND_API_TOKEN).
   * @default 'local'
   */
  localTenant: 'local',
  /**
   * The local caller's highest priority (config `caller.maxPriority`): the operator's, the queue's highest.
   * @default 1000
   */
  localMaxPriority: 1000,
} as const;

/** The HTTP API and dashboard (config `http.*`, `createApp` options). */
export const HTTP_DEFAULTS = {
  /**
   * The address the server listens on: loopback unless the operator says otherwise.
   * @default '127.0.0.1'
   */
  host: '127.0.0.1',
  /** @default 7420 */
  port: 7420,
  /**
   * A request body larger than this is refused (413).
   * @default 1_000_000
   */
  bodyLimitBytes: 1_000_000,
  /**
   * Live event streams at once.
   * @default 1000
   */
  maxStreams: 1000,
  /**
   * An event stream with nothing sent for this long is closed.
   * @default 1_800_000 (30 min)
   */
  streamIdleTimeoutMs: 30 * MINUTE,
  /**
   * How long a stream ticket (EventSource's credential) may be used to open a stream.
   * @default 300_000 (5 min)
   */
  streamTicketTtlMs: 5 * MINUTE,
  /**
   * How long a dashboard login cookie lasts.
   * @default 43_200_000 (12 h)
   */
  loginTtlMs: 12 * HOUR,
  /**
   * SSE keep-alive comment interval.
   * @default 15_000 (15 s)
   */
  keepAliveMs: 15 * SECOND,
} as const;
