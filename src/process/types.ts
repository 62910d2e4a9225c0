import type { AttemptLimits } from './cgroup.ts';
import type { Bridge, SandboxMode, SandboxRequest } from './sandbox/types.ts';

/** Why sessiond stopped an agent process. */
export type StopReason = 'requested' | 'idle_timeout' | 'exit_grace';

export interface SpawnSpec {
  /** Resolved executable path, or a name looked up in `env.PATH`. */
  command: string;
  /** argv, never through a shell. */
  args: readonly string[];
  cwd?: string;
  /** The agent's whole environment (nothing is inherited); the tree marker is added to it. */
  env: Record<string, string>;
  /**
   * Value of `SESSIOND_AGENT_MARKER` for this agent's tree; default a random UUID. Pass one to persist it
   * before spawning, so a crash right after the spawn still leaves a way to reap the tree.
   */
  marker?: string;
  /** Stage-1 signal of `stop()`; default 'SIGINT'. */
  interruptSignal?: NodeJS.Signals;
  /**
   * 'eof' (default): stdin is /dev/null, the agent sees EOF at once.
   * 'pipe': stdin is a pipe that stays open (see `AgentProcess.stdin`); stage 1 of `stop()` also writes '\u0003' to it.
   */
  stdinMode?: 'eof' | 'pipe';
  /**
   * With stdinMode 'eof': this text is written to stdin, which is then closed, so the
   * agent reads it and sees EOF (a prompt that must not pass through argv).
   */
  input?: string;
  /** Bytes of stderr kept in memory (the last ones); default 64 KiB. */
  stderrTailBytes?: number;
  /** No stdout output for this long while a reader waits for it -> `stop('idle_timeout')`. */
  idleTimeoutMs?: number;
  /** Ceilings of the attempt's cgroup (where the host has cgroup containment, see cgroup.ts). */
  limits?: AttemptLimits;
  /**
   * Confine the agent (see sandbox/): its files besides the cwd, and optionally the mode (default
   * this host's, `detectSandbox()`) and whether the policy requires a sandbox. Absent: no sandbox
   * (and no bridges unless `bridges` is set: then they are opened on the host, mode 'none').
   */
  sandbox?: SandboxRequest;
  /**
   * Host Unix sockets the agent reaches as `http://127.0.0.1:<port>` (see `Bridge`); their URLs go to
   * `finalize` before the agent starts.
   */
  bridges?: ReadonlyArray<Bridge>;
  /**
   * Called once with the bridges' URLs by name, before the spawn: what it returns replaces `args`
   * and/or `env` (e.g. HTTPS_PROXY, or a base URL in an agent's config). A throw or rejection
   * refuses the attempt with its message.
   */
  finalize?: (urls: Readonly<Record<string, string>>) => FinalSpawn | Promise<FinalSpawn>;
}

/** What `SpawnSpec.finalize` may replace. */
export interface FinalSpawn {
  args?: readonly string[];
  env?: Record<string, string>;
}

export interface ExitInfo {
  exitCode: number | null;
  signal: string | null;
  /** Set when the process ended after sessiond began to stop it; `null` when it ended by itself. */
  stopReason: StopReason | null;
}

export type SpawnResult = { ok: true; agent: AgentProcess } | { ok: false; error: string; code?: string };

/**
 * One running agent process and every process it starts (its "tree").
 *
 * Contract:
 * - `lines()`: stdout split on '\n' only, a trailing '\r' stripped, the last unterminated line delivered at
 *   EOF. Iterable once (a second call throws). Reading is pull-based: the agent blocks when the pipe is
 *   full and nobody reads. Ends at EOF, or once the agent has exited and stdout stays quiet while a
 *   reader waits (a descendant may still hold the pipe open). Never throws while iterating.
 * - `exited` never rejects; it resolves when the agent process itself exits (descendants may live on).
 * - `stop()` never throws; is idempotent (every call returns the same promise); kills the whole tree
 *   even when the agent exited before or during the stop (its cgroup whole, where the host has one,
 *   then every process found by marker, group and parent links); resolves when the tree is gone or
 *   the final wait ran out. Called after an agent that exited by itself, it is the sweep of what its
 *   tools left running.
 */
export interface AgentProcess {
  readonly pid: number;
  /** Unique value of `SESSIOND_AGENT_MARKER` in the agent's env; its descendants inherit it. */
  readonly marker: string;
  /** How the agent is confined ('none' when no sandbox was asked for). */
  readonly sandbox: SandboxMode;
  /** /proc start time of the agent (Linux), to tell it apart from a later process with the same pid. */
  readonly startTime: string | null;
  /** The agent's stdin when `stdinMode` is 'pipe', else `null`. */
  readonly stdin: NodeJS.WritableStream | null;
  lines(): AsyncIterable<string>;
  /** The last `stderrTailBytes` bytes of stderr so far, decoded as UTF-8. */
  stderrTail(): string;
  readonly exited: Promise<ExitInfo>;
  stop(reason?: StopReason): Promise<void>;
  /**
   * The agent waits for sessiond (e.g. for an operator's answer to a permission request): its
   * silence is not idleness. The idle timeout does not run until every hold is released (each
   * release function works once); then it starts its full period again if a reader waits.
   */
  holdIdle(): () => void;
}
