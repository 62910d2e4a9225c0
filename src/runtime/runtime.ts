import type { Queue } from 'bullmq';
import type { RetryPolicy, RetryPolicyResult } from '../retry/index.ts';
import { InputError, NotFoundError } from '../errors.ts';
import type { DeploymentPolicy } from '../policy/index.ts';
import type { ApprovalVerdict } from './approvals/decide.ts';
import { decideApproval, type ApprovalDecided } from './caller/approvals.ts';
import { deleteSession, deletions, type DeletionRecord } from './caller/delete.ts';
import { limitsView, pauseDispatch, resumeDispatch } from './caller/dispatch.ts';
import { enqueue, type Enqueued, type EnqueueHow } from './caller/enqueue.ts';
import { callerParts, type CallerParts } from './caller/parts.ts';
import { queuedPrompts, removeQueuedPrompt } from './caller/queued-prompts.ts';
import { getPolicy, resetPolicy, setPolicy } from './caller/retry-policy.ts';
import { bullQueue, exportSession, importSession, listSessions, sessionStates } from './caller/sessions.ts';
import { cancel, cancelMatching, resumeParked, retry } from './caller/turns.ts';
import type { FleetLimitView, QueuedPrompt, RuntimeOptions, SessionRecord, WorkerHeartbeat } from './caller/types.ts';
import { exposeInternals } from './internals.ts';
import {
  forkAtTurn,
  turnDiff,
  undoTurn,
  type DiffResult,
  type ForkResult,
  type UndoResult,
} from './caller/workspace-turns.ts';
import type { ImportResult } from './lifecycle/transfer.ts';
import type { ListFilter, ListPage } from './lifecycle/listing.ts';
import type { MessageHub } from './message-hub.ts';
import { SessionReads } from './session-reads.ts';
import type { StoredMessage } from './store/session-store.ts';
import {
  addSchedule,
  getSchedule,
  listSchedules,
  pauseSchedule,
  removeSchedule,
  resumeSchedule,
  scheduleParts,
  scheduleRuns,
  type ScheduleHow,
  type ScheduleParts,
} from './schedules/caller.ts';
import type { ScheduleRun, ScheduleView } from './schedules/spec.ts';

/** Defined with every other error of sessiond in src/errors.ts. */
export { InputError, NotFoundError };
export type { EnqueueRequest } from './enqueue-request.ts';
export type {
  ApprovalDecided,
  DeletionRecord,
  DiffResult,
  FleetLimitView,
  ForkResult,
  UndoResult,
  QueuedPrompt,
  RuntimeOptions,
  SessionRecord,
  WorkerHeartbeat,
};

/**
 * The caller side of sessiond, private to it: what the public client (src/api) delegates to, and
 * what sessiond's own tests and benchmarks drive. Each operation is a function of `caller/` over
 * the same parts (one file per concern); this class holds the parts and names the operations.
 * Contract: input is validated first and refused with an InputError naming the field, with nothing written.
 */
export class Runtime {
  readonly #parts: CallerParts;
  readonly #schedules: ScheduleParts;
  /** The reads, over the same parts (what the public client's read operations and createReader share). */
  readonly reads: SessionReads;

  constructor(options: RuntimeOptions) {
    this.#parts = callerParts(options);
    this.reads = new SessionReads(this.#parts);
    this.#schedules = scheduleParts(this.#parts, options.schedules);
    const { keys, redis, store, queue, policies, approvals, limits, fleetLimits } = this.#parts;
    // For sessiond's own workers, metrics and tests (src/runtime/internals.ts, not exported by the package).
    exposeInternals(this, { keys, redis, store, queue, policies, approvals, limits, fleetLimits });
  }

  ping = (): Promise<void> => this.reads.ping();
  lastSeq = (sessionId: string): Promise<number> => this.reads.lastSeq(sessionId);
  bullQueue = (): Queue => bullQueue(this.#parts);
  pauseDispatch = (limit?: string): Promise<{ paused: string[] }> => pauseDispatch(this.#parts, limit);
  resumeDispatch = (limit?: string): Promise<{ paused: string[]; woken: number }> => resumeDispatch(this.#parts, limit);
  limitsView = (): Promise<{ paused: boolean; limits: FleetLimitView[] }> => limitsView(this.#parts);
  enqueue = (input: unknown, how: EnqueueHow = {}): Promise<Enqueued> => enqueue(this.#parts, input, how);
  retry = (sessionId: string): Promise<{ sessionId: string; turn: number; retryOf: number }> =>
    retry(this.#parts, sessionId);
  resumeParked = (
    sessionId: string,
  ): Promise<{ sessionId: string; turn: number; parkedUntil: number; delivered: 'worker' | 'activation' }> =>
    resumeParked(this.#parts, sessionId);
  cancelMatching = (filter: Parameters<typeof cancelMatching>[1]): ReturnType<typeof cancelMatching> =>
    cancelMatching(this.#parts, filter);
  queuedPrompts = (sessionId: string): Promise<QueuedPrompt[]> => queuedPrompts(this.#parts, sessionId);
  removeQueuedPrompt = (
    sessionId: string,
    promptId: string,
    options: { waitMs?: number } = {},
  ): Promise<{ sessionId: string; promptId: string; removed: true }> =>
    removeQueuedPrompt(this.#parts, sessionId, promptId, options);
  deleteSession = (
    sessionId: string,
    options: { force?: boolean; waitMs?: number; actor?: string } = {},
  ): Promise<{ sessionId: string; deleted: boolean; cancelled: boolean }> =>
    deleteSession(this.#parts, sessionId, options);
  deletions = (limit = 100): Promise<DeletionRecord[]> => deletions(this.#parts, limit);
  cancel = (sessionId: string, reason?: string): Promise<{ delivered: 'worker' | 'activation' }> =>
    cancel(this.#parts, sessionId, reason);
  getSession = (sessionId: string): Promise<SessionRecord | null> => this.reads.getSession(sessionId);
  decideApproval = (
    sessionId: string,
    requestId: string,
    verdict: ApprovalVerdict,
    by: string,
    option?: string,
    reason?: string,
  ): Promise<ApprovalDecided> => decideApproval(this.#parts, sessionId, requestId, verdict, by, option, reason);
  listSessions = (
    filter: { state?: string; limit?: number } = {},
  ): Promise<Array<{ sessionId: string; state: string }>> => listSessions(this.#parts, filter);
  listPage = (filter: ListFilter = {}): Promise<ListPage> => this.reads.listPage(filter);
  exportSession = (sessionId: string): Promise<string> => exportSession(this.#parts, sessionId);
  importSession = (text: string, options: { as?: string } = {}): Promise<ImportResult> =>
    importSession(this.#parts, text, options);
  undoTurn = (sessionId: string, options: { force?: boolean; waitMs?: number } = {}): Promise<UndoResult> =>
    undoTurn(this.#parts, sessionId, options);
  forkAtTurn = (
    sessionId: string,
    options: { turn?: number; as: string; owner?: { name: string; maxSessions: number } },
  ): Promise<ForkResult> => forkAtTurn(this.#parts, sessionId, options);
  turnDiff = (sessionId: string, options: { turn?: number; stat?: boolean } = {}): Promise<DiffResult> =>
    turnDiff(this.#parts, sessionId, options);
  listingVersion = (): Promise<string> => this.reads.listingVersion();
  sessionStates = (ids: readonly string[]): Promise<Record<string, string | null>> => sessionStates(this.#parts, ids);
  readMessages = (sessionId: string, fromSeq = 1, count = 1000): Promise<StoredMessage[]> =>
    this.reads.readMessages(sessionId, fromSeq, count);
  followMessages = (sessionId: string, fromSeq: number, signal: AbortSignal): AsyncGenerator<StoredMessage> =>
    this.reads.followMessages(sessionId, fromSeq, signal);
  getPolicy = (sessionId?: string): Promise<{ policy: RetryPolicy; source: 'session' | 'global' | 'default' }> =>
    getPolicy(this.#parts, sessionId);
  setPolicy = (patch: unknown, sessionId?: string): Promise<RetryPolicyResult> =>
    setPolicy(this.#parts, patch, sessionId);
  resetPolicy = (sessionId?: string): Promise<RetryPolicy> => resetPolicy(this.#parts, sessionId);
  workers = (): Promise<WorkerHeartbeat[]> => this.reads.workers();
  /** What callers of this deployment may choose (the default policy, resolved on first use, when none was given). */
  resolvedPolicy = (): Promise<DeploymentPolicy> => this.#parts.deploymentPolicy();

  addSchedule = (input: unknown, how: ScheduleHow = {}): Promise<ScheduleView> =>
    addSchedule(this.#schedules, input, how);
  listSchedules = (): Promise<ScheduleView[]> => listSchedules(this.#schedules);
  getSchedule = (id: string): Promise<ScheduleView> => getSchedule(this.#schedules, id);
  removeSchedule = (id: string): Promise<{ id: string; removed: true }> => removeSchedule(this.#schedules, id);
  pauseSchedule = (id: string): Promise<ScheduleView> => pauseSchedule(this.#schedules, id);
  resumeSchedule = (id: string): Promise<ScheduleView> => resumeSchedule(this.#schedules, id);
  scheduleRuns = (id: string): Promise<ScheduleRun[]> => scheduleRuns(this.#schedules, id);

  /** Live message logs for many followers on one blocking connection (the HTTP event streams): see SessionReads. */
  get messageHub(): MessageHub {
    return this.reads.messageHub;
  }

  async close(): Promise<void> {
    await this.#schedules.close();
    await this.#parts.queue.close();
    await this.reads.close();
  }
}
