import type { DeploymentPolicy } from '../../policy/index.ts';
import type { AttemptRefusal } from '../../process/egress/index.ts';
import type { AttemptLimits } from '../../process/index.ts';
import type { AdmissionGate } from '../limits/gate.ts';
import type { Tracing } from '../tracing/tracing.ts';
import type { Workspaces } from '../../workspace/types.ts';

/** The worker's log (WorkerOptions.log): what the loop could not do, said instead of swallowed. */
export type LoopLog = (level: 'info' | 'warn' | 'error', message: string, fields?: Record<string, unknown>) => void;

export interface ActiveSessionConfig {
  /** Agent options that belong to the worker's host (command, agent dir, session dir, env…), per agent. */
  agentOptions: Readonly<Record<string, Readonly<Record<string, unknown>>>>;
  /** A backoff longer than this gives the worker slot back and parks the job until `nextRetryAt`. */
  holdBackoffMs: number;
  /** How often the holder looks at the inbox and the cancel flag even without a pub/sub event. */
  pollMs: number;
  /** The lease's time to live: a fleet-limit hold lapses with it (renewed with the lease). Default 30 s. */
  leaseTtlMs?: number;
  /** The deployment policy every stored request is checked against again, at the start of each attempt. */
  policy: DeploymentPolicy;
  /** Ceilings of each attempt's cgroup. */
  limits?: AttemptLimits;
  /** Messages the session's log may hold (0: no limit): the attempt that reaches it is stopped and ends failed, category `quota`. */
  maxLogMessages?: number;
  /** Bytes of message content the session's log may hold (0: no limit): as maxLogMessages. */
  maxLogBytes?: number;
  /** Per-session workspaces (docs/workspaces.md); none: sessions run in their cwd, as before. */
  workspaces?: Workspaces | null;
  /** Fleet limits and paused dispatch: an attempt they apply to waits (parked) until admitted. */
  gate?: AdmissionGate;
  /** Told of what an embedder may observe (src/api/worker.ts); a listener that throws changes nothing. */
  events?: SessionEvents;
  /** Spans of turns and attempts (none: no tracing, nothing is made). */
  tracing?: Tracing | null;
  /** This worker's id (on the spans). */
  workerId?: string;
  /** Where the loop says what failed and was let go (a best-effort write, a listener that threw). Default: nowhere. */
  log?: LoopLog;
  /**
   * Egress by policy (src/process/egress): each attempt gets a proxy that lets it reach only its
   * model host and `policy.network` of its agent, and a model bridge holding its key. This is told
   * of every refused request (the worker audits and counts it). Absent: no egress proxy.
   */
  onEgressRefused?: (refusal: AttemptRefusal) => void;
}

/** What a worker tells its embedder, as the session machine takes it (the fenced write follows at once). */
export interface SessionEvents {
  turnEnded?(event: {
    sessionId: string;
    turn: number;
    status: 'completed' | 'failed' | 'cancelled';
    failureReason: string | null;
    cancelReason: string | null;
  }): void;
  attemptFailed?(event: { sessionId: string; turn: number; attempt: number; category: string; text: string }): void;
}

export type DriveOutcome =
  { kind: 'released' } | { kind: 'parked'; until: number } | { kind: 'stale' } | { kind: 'interrupted' };

/** The loop's log bound to one session: every line names it, and the error when there is one (null: none). */
export function sessionLog(
  log: LoopLog | undefined,
  sessionId: string,
): (message: string, error: unknown, fields?: Record<string, unknown>) => void {
  return (message, error, fields) =>
    log?.('warn', message, {
      sessionId,
      ...(error === null || error === undefined
        ? {}
        : { error: error instanceof Error ? error.message : String(error) }),
      ...fields,
    });
}

export type WarnLog = ReturnType<typeof sessionLog>;

/** Calls an embedder's listener: one that throws never breaks the session (it is logged). */
export function tell(warn: WarnLog, fn: () => void): void {
  try {
    fn();
  } catch (error) {
    warn('an event listener threw', error);
  }
}
