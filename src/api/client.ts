import type { Queue } from 'bullmq';
import type { DeploymentPolicy, PolicyInput } from '../policy/index.ts';
import type { RetryPolicy, RetryPolicyResult } from '../retry/index.ts';
import type { ApprovalVerdict } from '../runtime/approvals/decide.ts';
import type { StoredApproval } from '../runtime/approvals/store.ts';
import type { EnqueueRequest } from '../runtime/enqueue-request.ts';
import type { Enqueued } from '../runtime/caller/enqueue.ts';
import type { LifecycleLimits } from '../runtime/lifecycle/limits.ts';
import type { ListPage } from '../runtime/lifecycle/listing.ts';
import type { ImportResult } from '../runtime/lifecycle/transfer.ts';
import type { WorkspaceConfig } from '../workspace/types.ts';
import { resolveWorkspacesOption } from './workspaces-option.ts';
import { connections, type RedisOption } from './connections.ts';
import type { DeploymentReader, Reader, SessionReader, SessionsReader } from './reader.ts';
import type {
  ApprovalDecided,
  DeletionRecord,
  DiffResult,
  FleetLimitView,
  ForkResult,
  QueuedPrompt,
  UndoResult,
  WorkerHeartbeat,
} from '../runtime/runtime.ts';
import type { ApprovalSummary, SessionView } from '../runtime/inspect.ts';
import type { NoLiveWorkerNotice } from '../runtime/live-workers.ts';
import { bindClient } from './bind.ts';
import type { DefinedAgent } from './define-agent.ts';
import { registerAgent } from '../agents/registry.ts';
import { deploymentPolicy } from '../runtime/deployment-policy.ts';
import type { ScheduleLimits, ScheduleRequest, ScheduleRun, ScheduleView } from '../runtime/schedules/spec.ts';

/** A session's retention and quotas (docs/concepts.md "lifecycle"): the operator's, never a caller's. */
export type LifecycleOptions = LifecycleLimits;

export interface ClientOptions {
  redis: RedisOption;
  /** The key prefix shared with the workers. @default 'sessiond' */
  prefix?: string;
  /** Agents of your own (defineAgent) that callers may choose; the workers need them too. */
  agents?: readonly DefinedAgent[];
  /** The deployment policy requests are checked against (as `policy` in the config file). @default every agent, `workspace` the process's cwd */
  deploymentPolicy?: PolicyInput;
  /** The workspace: a session's cwd when its caller names none, and the default allowed root. @default process.cwd() */
  workspace?: string;
  /** Retention and quotas (as `lifecycle` in the config file). */
  lifecycle?: Partial<LifecycleOptions>;
  /** Bounds on schedules (as `schedules` in the config file): `maxSchedules`, `maxPerCaller`, `minIntervalMs`. */
  schedules?: Partial<ScheduleLimits>;
  /**
   * The deployment's workspaces (as `workspaces` in the config file): what exporting, importing, forking and
   * diffing a session's workspace read. The workers' value; by default theirs by default (under sessiond's
   * state dir, as `createWorker`'s). `false`: none (those operations refuse a session with a workspace).
   * @default on, under the state dir
   */
  workspaces?: WorkspaceConfig | false;
}

export type {
  RedisOption,
  ApprovalDecided,
  ApprovalSummary,
  ApprovalVerdict,
  DeletionRecord,
  DiffResult,
  EnqueueRequest,
  FleetLimitView,
  ForkResult,
  UndoResult,
  WorkspaceConfig,
  ImportResult,
  ListPage,
  NoLiveWorkerNotice,
  QueuedPrompt,
  SessionView,
  StoredApproval,
  WorkerHeartbeat,
  ScheduleLimits,
  ScheduleRequest,
  ScheduleRun,
  ScheduleView,
};

/**
 * Who creates a session, for its session cap (docs/security.md): a name (an API token's) and the sessions
 * created under that name that may exist at once. A new session over the cap is a QuotaError `maxSessions`.
 */
export interface SessionOwner {
  name: string;
  maxSessions: number;
}

/** Every session: list (SessionsReader), enqueue into (creating), import, cancel in bulk, the deletion audit. */
export interface SessionsClient extends SessionsReader {
  /**
   * Adds a prompt to a session (created unless it exists; a new id unless `sessionId`) and makes sure a worker
   * runs it. Refused with nothing written: InputError, ConflictError (being deleted), QuotaError. With `owner`,
   * a new session takes a slot of that owner's session cap (QuotaError `maxSessions` when it has none left).
   */
  enqueue(request: EnqueueRequest, options?: { owner?: SessionOwner }): Promise<Enqueued>;
  /** Restores an archive (as `as`, default its own id). Under a new id the copy's agent conversation is `forked` (continues the original's) or `new`. */
  import(archive: string, options?: { as?: string }): Promise<ImportResult>;
  /** Cancels every session in `state` (queued, running, backoff, parked), optionally of one agent; `dryRun` only lists them. */
  cancelMatching(filter: {
    state?: unknown;
    agent?: unknown;
    dryRun?: boolean;
    reason?: string;
    max?: number;
  }): Promise<{
    dryRun: boolean;
    matched: Array<{ sessionId: string; state: string; agent: string }>;
    cancelled: number;
  }>;
  /** The deletion audit, newest first (at most `limit`, default 100). */
  deletions(options?: { limit?: number }): Promise<DeletionRecord[]>;
}

/**
 * One session, by id: its reads (SessionReader: inspect, messages, lastSeq, watch) and what changes
 * it. Making a handle reads nothing; each method is one operation. Contract, for every method: a
 * malformed id is an InputError naming `sessionId`; an unknown one a NotFoundError (`code` `not_found`).
 */
export interface SessionHandle extends SessionReader {
  /** Adds a prompt to this existing session (NotFoundError otherwise): its next turn. */
  prompt(
    request: Omit<EnqueueRequest, 'sessionId' | 'retryPolicy' | 'retention'>,
  ): Promise<{ sessionId: string; turn: number; promptId: string; steered: boolean }>;
  /** Cancels the current turn wherever it runs. */
  cancel(reason?: string): Promise<{ delivered: 'worker' | 'activation' }>;
  /**
   * Retries the failed last turn as a new turn (the operator's turn retry: same prompt and options, a new
   * series of attempts). ConflictError when the last turn did not fail, a prompt waits or a cancel is pending.
   */
  retry(): Promise<{ sessionId: string; turn: number; retryOf: number }>;
  /** Resumes a session parked at a quota wall now, before the provider's reset (ConflictError when it is not parked). */
  resume(): Promise<{ sessionId: string; turn: number; parkedUntil: number; delivered: 'worker' | 'activation' }>;
  /** Deletes the session fleet-wide: a finished one, or with `force` a running one (its turn cancelled first). `actor` is who asks, for the deletion audit. */
  delete(options?: {
    force?: boolean;
    actor?: string;
    waitMs?: number;
  }): Promise<{ sessionId: string; deleted: boolean; cancelled: boolean }>;
  /** The session as a versioned JSON-lines archive. */
  export(): Promise<string>;
  /**
   * Takes back the last completed turn of a workspace session: its files and the agent's conversation are the
   * previous turn's again (a `workspace.undone` message says so). ConflictError while a turn runs or is queued
   * (`force`: cancel it first), for a session without a workspace, its first turn, or an agent that cannot.
   */
  undo(options?: { force?: boolean; waitMs?: number }): Promise<UndoResult>;
  /**
   * A new session `as` with the files and the conversation of this one after turn `turn` (default: the last);
   * this one is not changed. Needs `workspaces` in the client's options. InputError for an unknown turn. With
   * `owner`, the new session takes a slot of that owner's session cap (QuotaError `maxSessions` when none is left).
   */
  fork(options: { turn?: number; as: string; owner?: SessionOwner }): Promise<ForkResult>;
  /** What turn `turn` (default: the last) changed in the workspace's files: a unified diff, or with `stat` a summary. Needs `workspaces`. */
  diff(options?: { turn?: number; stat?: boolean }): Promise<DiffResult>;
}

/** Prompts waiting for their turn. */
export interface PromptsClient {
  /** The session's queued prompts, in the order their turns will run. NotFoundError for an unknown session. */
  list(sessionId: string): Promise<QueuedPrompt[]>;
  /** Removes a queued prompt. ConflictError when its turn has started (cancel it instead), NotFoundError when there is no such prompt. */
  remove(
    sessionId: string,
    promptId: string,
    options?: { waitMs?: number },
  ): Promise<{ sessionId: string; promptId: string; removed: true }>;
}

/** An operator's answers to the agents' permission requests. */
export interface ApprovalsClient {
  /**
   * Answers a permission request of the session's current turn (`by`: who, for the audit). The first decision
   * wins (ConflictError after it); `option` picks one of the agent's options for that verdict.
   */
  decide(
    sessionId: string,
    requestId: string,
    decision: { verdict: ApprovalVerdict; by: string; option?: string; reason?: string },
  ): Promise<ApprovalDecided>;
}

/** The retry policy: how the session machine retries a failed attempt (global, or one session's own). */
export interface RetryPolicyClient {
  /** The policy in force: the session's own, else the global one, else the defaults. */
  get(options?: { sessionId?: string }): Promise<{ policy: RetryPolicy; source: 'session' | 'global' | 'default' }>;
  /** Validates `patch` over the policy in force; `{ ok: false, errors }` changes nothing. */
  set(patch: Partial<RetryPolicy>, options?: { sessionId?: string }): Promise<RetryPolicyResult>;
  /** Back to the defaults (global), or to following the global one (a session). */
  reset(options?: { sessionId?: string }): Promise<RetryPolicy>;
}

/**
 * Schedules (docs/schedules.md): a prompt enqueued on a timing (`cron` with `tz`, or `every`) into one session or a
 * new session per firing, fired by the workers (one firing per tick fleet-wide). Contract: input is validated first
 * and refused with an InputError naming the field, nothing written; an unknown id is a NotFoundError.
 */
export interface SchedulesClient {
  /**
   * Adds a schedule; each firing is the enqueue `request` describes, checked now as that enqueue would be. `caller`
   * (default `local`) counts against the deployment's per-caller limit; `owner`'s session cap holds each new session.
   * QuotaError `maxSchedules` / `maxSchedulesPerCaller` at a limit, ConflictError for an id taken.
   */
  add(request: ScheduleRequest, options?: { caller?: string; owner?: SessionOwner }): Promise<ScheduleView>;
  /** Every schedule, oldest first, with its next run, its last run and outcome, and its firings by outcome. */
  list(): Promise<ScheduleView[]>;
  get(id: string): Promise<ScheduleView>;
  /** It fires no more (a firing under way finishes). */
  remove(id: string): Promise<{ id: string; removed: true }>;
  /** No firing until resumed (ConflictError for an ended schedule). */
  pause(id: string): Promise<ScheduleView>;
  /** Fires again from its timing's next tick (the ticks missed while paused are not made up). */
  resume(id: string): Promise<ScheduleView>;
  /** Its last firings (at most 100), newest first: when, the tick, the outcome, the session and turn it made. */
  runs(id: string): Promise<ScheduleRun[]>;
}

/** Dispatch: whether workers start attempts, fleet-wide or under one fleet limit. */
export interface DispatchClient {
  /** Stops starting attempts (fleet-wide, or under the fleet limit named `limit`): running turns finish, cancels still work. */
  pause(limit?: string): Promise<{ paused: string[] }>;
  /** Starts attempts again; the sessions waiting for it are woken in order. */
  resume(limit?: string): Promise<{ paused: string[]; woken: number }>;
  /** Every fleet limit with what is held and waiting under it now, and whether dispatch is paused fleet-wide. */
  status(): Promise<{ paused: boolean; limits: FleetLimitView[] }>;
}

/** The deployment this client talks to: its policy, its workers, its queue. */
export interface DeploymentClient extends DeploymentReader {
  /** The deployment policy: what callers may choose (resolved on first use). */
  policy(): Promise<DeploymentPolicy>;
  /** The activation queue's BullMQ queue (partition 0), for an operator's view such as Bull Board. */
  bullQueue(): Queue;
}

/** The sessiond client, by noun: everything a caller does, against the Redis the workers use. */
export interface Client extends Reader {
  sessions: SessionsClient;
  /** A handle on one session (no request is made until a method is called). */
  session(sessionId: string): SessionHandle;
  prompts: PromptsClient;
  approvals: ApprovalsClient;
  retryPolicy: RetryPolicyClient;
  dispatch: DispatchClient;
  deployment: DeploymentClient;
  schedules: SchedulesClient;
  /** Closes every connection this client opened. */
  close(): Promise<void>;
}

/**
 * A client of a sessiond deployment, by noun: `client.sessions` (list, enqueue, import…),
 * `client.session(id)` (inspect, watch, cancel, delete…), `client.prompts`, `client.approvals`,
 * `client.retryPolicy`, `client.dispatch`, `client.deployment`. Connects lazily.
 *
 * Contract: input is validated first and refused with an InputError naming the field, with
 * nothing written; any operation on an unknown session is a NotFoundError (`code` `not_found`).
 */
export function createClient(options: ClientOptions): Client {
  const workspaces = resolveWorkspacesOption(options.workspaces);
  const { connect, closeAll } = connections(options.redis);
  return bindClient(
    {
      connect,
      ...(options.prefix === undefined ? {} : { prefix: options.prefix }),
      ...(options.lifecycle === undefined ? {} : { limits: options.lifecycle }),
      ...(workspaces === null ? {} : { workspaces }),
      ...(options.schedules === undefined ? {} : { schedules: options.schedules }),
      // The agents registered and the policy resolved on first enqueue (a read loads neither).
      policy: async () => {
        for (const agent of options.agents ?? []) registerAgent(agent.name, agent.definition);
        return deploymentPolicy({
          ...(options.deploymentPolicy === undefined ? {} : { policy: options.deploymentPolicy }),
          ...(options.workspace === undefined ? {} : { workspace: options.workspace }),
        });
      },
    },
    closeAll,
  );
}
