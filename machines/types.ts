import type { AgentTerminalMessage, CliMessage, FailureCategory } from '../src/protocol/index.ts';
import type { SandboxMode } from '../src/process/sandbox/types.ts';
import type { NoRetryReason, RetryPolicy } from '../src/retry/index.ts';

/** Agent options of one turn (model, thinking level, cwd, …): opaque to the machine, passed to the provider. */
export type TurnOptions = Readonly<Record<string, unknown>>;

export interface PromptInput {
  /** Caller's id for the prompt (e.g. the inbox entry), to prove none is lost or run twice. */
  id: string;
  text: string;
  options?: TurnOptions;
  /** An operator's retry of the failed turn with this index: the same prompt, a new series of attempts. */
  retryOf?: number;
}

/**
 * What one attempt is asked to do. On a retry, `continuation` says the agent's
 * session already holds the user's prompt: the provider resumes that session
 * with `text` (a short continuation) instead of sending the prompt again.
 */
export interface AttemptRequest {
  sessionId: string;
  turn: number;
  attempt: number;
  promptId: string;
  text: string;
  continuation: boolean;
  /** The agent's own session to resume, when there is one. */
  agentSessionId: string | null;
  options: TurnOptions;
}

export interface AttemptMeta {
  sessionId: string;
  turn: number;
  attempt: number;
}

/** One attempt of the agent. Contract: the provider's — ends with exactly one terminal message, or rejects with the abort reason after the process tree is gone. */
export type AttemptRunner = (request: AttemptRequest, context: AttemptRunContext) => AsyncIterable<CliMessage>;

export interface AttemptRunContext {
  signal: AbortSignal;
  /** Called once the agent's process runs, with how it is confined (an agent that spawns no process of sessiond's never calls it). */
  spawned?: (info: { sandbox: SandboxMode }) => void;
  /**
   * Called when an attempt the machine stopped (a cancel, an interrupt, a timeout) leaves the agent's conversation
   * saved (its state exported, holding the prompt): the next turn resumes it, as after a failure with its prompt recorded.
   */
  promptRecorded?: () => void;
}

/** Where every streamed message goes (the message log); the machine's context never holds them. */
export type MessageSink = (message: CliMessage, meta: AttemptMeta) => void | Promise<void>;

export type AttemptOutcome = 'completed' | 'failed' | 'interrupted' | 'cancelled';

export interface AttemptRecord {
  attempt: number;
  startedAt: number;
  endedAt: number | null;
  outcome: AttemptOutcome | null;
  category: FailureCategory | null;
  errorText: string | null;
  /** The backoff that followed this attempt, when a retry was scheduled. */
  delayMs: number | null;
  /** The agent's session had recorded the user's prompt when the attempt ended. */
  promptRecorded: boolean;
  /** The attempt ended on a quota wall: the session was parked until the reset; `free`: it did not count against maxAttempts. */
  quotaWall?: 'free' | 'counted';
  /** How the attempt's agent was confined (src/process/sandbox): absent until its process runs, and for agents sessiond does not spawn. */
  sandbox?: SandboxMode;
}

export type TurnStatus = 'running' | 'backoff' | 'parked' | 'cancelling' | 'completed' | 'failed' | 'cancelled';
/** `turn_timeout`: the turn ran past its wall-clock limit (the policy's `maxTurnMs`). */
export type TurnFailureReason = NoRetryReason | 'turn_timeout';

export interface TurnState {
  index: number;
  promptId: string;
  text: string;
  options: TurnOptions;
  status: TurnStatus;
  failureReason: TurnFailureReason | null;
  cancelReason: string | null;
  startedAt: number;
  endedAt: number | null;
  attempts: AttemptRecord[];
  /** Set when the turn's wall-clock limit stopped it: it ends `failed` (not `cancelled`) once the agent is gone. */
  timedOut?: boolean;
  /**
   * The failed turn this one re-runs (an operator's retry), and whether its last attempt had recorded
   * the prompt in the agent's session: the first attempt then continues that conversation as a retry would.
   */
  retryOf?: { turn: number; promptRecorded: boolean };
  /** Attempts of this turn that ended on a free quota wall (not counted against maxAttempts). */
  freeWalls?: number;
  /** In `parked`: the quota wall the next attempt waits behind (null otherwise). */
  quotaWall?: QuotaWall | null;
}

/** A rate limit whose reset lies past the normal backoff: the session is parked until `until`. */
export interface QuotaWall {
  /** The provider's reset: the next attempt starts then, or when an operator resumes the session. */
  until: number;
  since: number;
  /** The attempt that hit it did not count against maxAttempts. */
  free: boolean;
  category: FailureCategory;
}

export interface LastFailure {
  category: FailureCategory;
  errorText: string;
  retryAfterMs: number | null;
  at: number;
}

export interface SessionContext {
  sessionId: string;
  agentSessionId: string | null;
  /** The agent's session holds at least one prompt, so it can be resumed. */
  agentSessionResumable: boolean;
  policy: RetryPolicy;
  /** Turns started so far; the current turn's index. */
  turnIndex: number;
  /** The current attempt of the current turn (0 before the first). */
  attempt: number;
  turn: TurnState | null;
  nextRetryAt: number | null;
  lastFailure: LastFailure | null;
  mailbox: PromptInput[];
  /** Ids of prompts whose turn has ended, most recent last (bounded). */
  finishedPromptIds: string[];
  /** In `waiting`: what the next attempt waits for (absent from snapshots older than this field). */
  waitingFor?: WaitingFor | null;
}

/**
 * Why a session's next attempt is not started yet: a fleet limit's name and what holds it back, or
 * (`reason: "agent"`, `limit` `agent:<name>`) the agent no worker that took the session offers.
 */
export interface WaitingFor {
  limit: string;
  reason: 'full' | 'rate' | 'tokens' | 'cooldown' | 'paused' | 'agent';
  /** `reason: "agent"`: the agent the session waits for a worker offering. */
  agent?: string;
  /** When the holder looks again at the latest (ms); a release of capacity wakes it sooner. */
  until: number;
  since: number;
}

export interface SessionInput {
  sessionId: string;
  policy?: RetryPolicy;
}

/** What the attempt actor reports to the machine: only what changes the machine's course. */
export type AttemptEvent =
  | { type: 'attempt.session'; agentSessionId: string }
  | { type: 'attempt.spawned'; sandbox: SandboxMode }
  | { type: 'attempt.ended'; terminal: AgentTerminalMessage };

export type SessionEvent =
  | { type: 'session.prompt'; prompt: PromptInput }
  | { type: 'session.cancel'; reason?: string }
  | { type: 'session.policy'; policy: RetryPolicy }
  | { type: 'session.restored' }
  | { type: 'session.waiting'; waitingFor: WaitingFor }
  | { type: 'session.capacity' }
  /** An operator resumes a session parked at a quota wall before its reset. */
  | { type: 'session.resume' }
  /** An operator removed a queued prompt: it leaves the mailbox (a prompt whose turn has started is not touched). */
  | { type: 'session.unqueue'; promptId: string }
  /** Raised by the machine itself at the turn's wall-clock limit (`maxTurnMs`). */
  | { type: 'turn.deadline' }
  | AttemptEvent;
