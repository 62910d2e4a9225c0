import { randomUUID } from 'node:crypto';
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { PersistedSession } from '../../machines/restore.ts';
import type { SessionContext } from '../../machines/types.ts';
import type { RetryPolicy, RetryPolicyResult } from '../retry/index.ts';
import { EventBus } from './event-bus.ts';
import { exposeInternals } from './internals.ts';
import { MessageHub } from './message-hub.ts';
import { hgetEach } from './redis/batch.ts';
import { createKeys, SESSION_ID_PATTERN, type Keys } from './keys.ts';
import { PolicyStore } from './policy-store.ts';
import { createSessionQueue, newJobId, type SessionQueue } from './queue.ts';
import { parseEntry, SessionStore, type StoredMessage } from './store/session-store.ts';
import type { DeploymentPolicy } from '../policy/index.ts';
import { DEFAULT_AGENT } from '../agents/default-agent.ts';
import { sessionUsage, type SessionUsage } from './usage/usage.ts';
import { parseDuration } from '../config/duration.ts';
import { ConflictError, QuotaError } from './lifecycle/errors.ts';
import { LIFECYCLE_DEFAULTS, type LifecycleLimits } from './lifecycle/limits.ts';
import { removeSession } from './lifecycle/remove.ts';
import { AUDIT_MAX, lifecycleKeys } from './lifecycle/keys.ts';
import type { ImportResult } from './lifecycle/transfer.ts';
import { listPage, type ListFilter, type ListPage } from './lifecycle/listing.ts';
import { hasErrorCode, InputError, NotFoundError } from '../errors.ts';
import { FleetLimits, type LimitStatus } from './limits/fleet-limits.ts';
import type { LimitRule } from './limits/match.ts';
import { promoteActivations } from './limits/wake.ts';
import { pushRetry } from './retry-turn.ts';
import { requestResume, wallToken } from './resume-parked.ts';
import { removeQueued, unqueueField, unqueueRequests } from './queued-prompts.ts';
import { BULK_CANCEL_MAX, CANCELLABLE_STATES, selectForCancel } from './bulk-cancel.ts';
import { ApprovalStore, type StoredApproval } from './approvals/store.ts';
import { chooseOption, REQUEST_ID_PATTERN, type ApprovalVerdict } from './approvals/decide.ts';
import type { TurnPrompt } from './turn-prompts.ts';

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

/** Defined with every other error of sessiond in src/errors.ts. */
export { InputError, NotFoundError };

/** KEYS: meta. ARGV: policyJson. → 1 set | 0 no such session, or one being deleted. */
const SET_POLICY = `
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], 'deleting') == 1 then return 0 end
redis.call('HSET', KEYS[1], 'policy', ARGV[1])
return 1
`;

export type { EnqueueRequest } from './enqueue-request.ts';

export interface SessionView {
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
  /** A transition that started a turn carries its prompt (see turn-prompts.ts). */
  history: Array<{ at: number; from: string; to: string; event: string; prompt?: TurnPrompt }>;
  lastSeq: number;
  heldBy: string | null;
  cancelRequested: boolean;
  /** The permission requests of the session's current turn (decided ones included). */
  approvals: StoredApproval[];
  /** Token usage summed per session, latest turn and attempt (null: none reported yet). */
  usage: SessionUsage | null;
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
}

/** A fleet limit as operators see it: its rule and each of its keys in use. */
export interface LimitView {
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

/**
 * What the interfaces (CLI, HTTP, dashboard) call: enqueue, cancel, inspect,
 * read messages, configure the retry policy. Contract: input is validated first
 * and refused with an InputError naming the field, with nothing written.
 */
export class Runtime {
  readonly #keys: Keys;
  readonly #redis: Redis;
  readonly #store: SessionStore;
  readonly #queue: SessionQueue;
  readonly #policies: PolicyStore;
  readonly #approvals: ApprovalStore;
  readonly #bus: EventBus;
  #policy: DeploymentPolicy | undefined;
  readonly #loadPolicy: (() => Promise<DeploymentPolicy>) | undefined;
  readonly #connect: (role: string) => Redis;
  #hub: MessageHub | null = null;
  readonly #limits: LifecycleLimits;
  readonly #fleetLimits: FleetLimits;

  constructor(options: RuntimeOptions) {
    this.#keys = createKeys(options.prefix ?? 'sessiond');
    this.#connect = options.connect;
    if (typeof options.policy === 'function') this.#loadPolicy = options.policy;
    else this.#policy = options.policy;
    this.#redis = options.connect('runtime');
    this.#limits = { ...LIFECYCLE_DEFAULTS, ...options.limits };
    this.#store = new SessionStore(this.#redis, this.#keys, { retentionMs: this.#limits.retentionMs });
    this.#queue = createSessionQueue(() => options.connect('runtime-queue'), this.#keys, { partitions: options.queuePartitions ?? 1 });
    this.#policies = new PolicyStore(this.#redis, this.#keys);
    this.#approvals = new ApprovalStore(this.#redis, this.#keys);
    // Publishing only: the subscriber connection is made lazily by those who listen.
    this.#bus = new EventBus(this.#redis, this.#redis, this.#keys);
    this.#fleetLimits = new FleetLimits(this.#redis, this.#keys.prefix, options.fleetLimits ?? []);
    // For sessiond's own workers, metrics and tests (src/runtime/internals.ts, not exported by the package).
    exposeInternals(this, {
      keys: this.#keys,
      redis: this.#redis,
      store: this.#store,
      queue: this.#queue,
      policies: this.#policies,
      approvals: this.#approvals,
      limits: this.#limits,
      fleetLimits: this.#fleetLimits,
    });
  }

  /** Reaches Redis (a health check, or a client's first contact); rejects when it cannot. */
  async ping(): Promise<void> {
    await this.#redis.ping();
  }

  /** The seq of the session's last stored message: 0 before its first (or for an unknown session). */
  async lastSeq(sessionId: string): Promise<number> {
    checkSessionId(sessionId);
    return this.#store.lastSeq(sessionId);
  }

  /** The activation queue's BullMQ queue (partition 0: with one partition, the whole queue), for an operator's view such as Bull Board. */
  bullQueue(): Queue {
    return this.#queue.queue;
  }

  /** Stops starting attempts fleet-wide (no `limit`) or under one limit: running turns finish, cancels still work. */
  async pauseDispatch(limit?: string): Promise<{ paused: string[] }> {
    this.#checkLimitName(limit);
    await this.#fleetLimits.pause(limit);
    await this.#bus.publish({ sessionId: '*', kind: 'dispatch' });
    return { paused: await this.#fleetLimits.paused() };
  }

  /** Starts attempts again (fleet-wide or under one limit); the sessions waiting for it are woken in order. */
  async resumeDispatch(limit?: string): Promise<{ paused: string[]; woken: number }> {
    this.#checkLimitName(limit);
    await this.#fleetLimits.resume(limit);
    await this.#bus.publish({ sessionId: '*', kind: 'dispatch' });
    const woken = await promoteActivations(this.#store, this.#queue, await this.#fleetLimits.wakeable());
    return { paused: await this.#fleetLimits.paused(), woken };
  }

  #checkLimitName(limit: string | undefined): void {
    if (limit === undefined) return;
    if (!this.#fleetLimits.rules.some((r) => r.name === limit)) {
      const names = this.#fleetLimits.rules.map((r) => r.name);
      throw new InputError([
        { field: 'limit', message: `no limit is named ${JSON.stringify(limit)} (${names.length === 0 ? 'this deployment has no limits' : `limits: ${names.join(', ')}`})` },
      ]);
    }
  }

  /** Every configured limit with what is held and waiting under it now, and whether dispatch is paused. */
  async limitsView(): Promise<{ paused: boolean; limits: LimitView[] }> {
    const [status, paused] = await Promise.all([this.#fleetLimits.status(), this.#fleetLimits.paused()]);
    const limits = this.#fleetLimits.rules.map((rule): LimitView => {
      const keys = status.filter((s) => s.name === rule.name);
      return {
        name: rule.name,
        match: rule.match,
        maxConcurrent: rule.maxConcurrent === 0 ? null : rule.maxConcurrent,
        maxStartsPerMinute: rule.maxStartsPerMinute === 0 ? null : rule.maxStartsPerMinute,
        maxTokensPerMinute: rule.maxTokensPerMinute === 0 ? null : rule.maxTokensPerMinute,
        paused: paused.includes('*') || paused.includes(rule.name),
        inUse: keys.reduce((n, k) => n + k.inUse, 0),
        waiting: keys.reduce((n, k) => n + k.waiting, 0),
        keys,
      };
    });
    return { paused: paused.includes('*'), limits };
  }

  /**
   * Adds a prompt (creating the session unless `mustExist`). Refused with nothing written: InputError
   * (a bad field), NotFoundError (mustExist, unknown), ConflictError (being deleted), QuotaError (a limit).
   */
  async enqueue(input: unknown, how: { mustExist?: boolean } = {}): Promise<{ sessionId: string; turn: number; created: boolean }> {
    // The agents (and their option schemas) are loaded by the first enqueue, not by every command;
    // the policy first: resolving it registers a library caller's own agents.
    const policy = await this.#deploymentPolicy();
    const { admitTurn, DEFAULT_AGENT, TurnOptionsSchema } = await import('./enqueue-checks.ts');
    // Its schemas (zod) and the retry policy's are loaded by the first write, not by a read.
    const { EnqueueRequestSchema, zodIssues } = await import('./enqueue-request.ts');
    const { DEFAULT_RETRY_POLICY, mergeRetryPolicy } = await import('../retry/policy.ts');
    const parsed = EnqueueRequestSchema.safeParse(input);
    const rawOptions = (input as { options?: unknown } | null)?.options;
    const optionIssues =
      rawOptions === null || typeof rawOptions !== 'object' || Array.isArray(rawOptions) ? [] : zodIssues(TurnOptionsSchema.safeParse(rawOptions).error, ['options']);
    if (!parsed.success || optionIssues.length > 0) throw new InputError([...(parsed.success ? [] : zodIssues(parsed.error)), ...optionIssues]);
    const request = parsed.data;
    let policyJson: string | null = null;
    if (request.retryPolicy !== undefined) {
      const policy = mergeRetryPolicy(DEFAULT_RETRY_POLICY, request.retryPolicy);
      if (!policy.ok) throw new InputError(policy.errors.map((e) => ({ field: `retryPolicy.${e.field}`, message: e.message })));
      const { parkLimitIssues, turnLimitIssue } = await import('./deployment-policy.ts');
      const deployment = await this.#deploymentPolicy();
      const overLimit = turnLimitIssue(request.retryPolicy, deployment);
      const overPark = parkLimitIssues(request.retryPolicy, deployment);
      if (overLimit !== null || overPark.length > 0) throw new InputError([...(overLimit === null ? [] : [overLimit]), ...overPark]);
      policyJson = JSON.stringify(policy.policy);
    }
    const retentionMs = request.retention === undefined ? undefined : this.#retention(request.retention);
    const options = request.options ?? {};
    // The deployment's policy before anything is written; the worker checks the stored request again.
    const admitted = await admitTurn(policy, options, request.prompt);
    if (!admitted.ok) throw new InputError(admitted.issues);
    const sessionId = request.sessionId ?? randomUUID();
    const create: Record<string, string> = { agent: typeof options.agent === 'string' ? options.agent : DEFAULT_AGENT, options: JSON.stringify(options) };
    if (request.tenant !== undefined) create.tenant = request.tenant;
    // A new session's fleet-index shard is its partition's now, kept for good (see keys.ts); the count is recorded first, so readers merge that shard.
    const shard = this.#queue.indexShardOf(sessionId);
    if (shard > 0) {
      create.shard = String(shard);
      await this.#queue.knownPartitions();
    }
    const jobId = newJobId(sessionId);
    const prompt = { id: randomUUID(), text: request.prompt, options, enqueuedAt: Date.now() };
    const result = await this.#store.enqueue(sessionId, create, prompt, policyJson, jobId, {
      ...(how.mustExist === true ? { mustExist: true } : {}),
      maxQueued: this.#limits.maxQueuedPrompts,
      maxLog: this.#limits.maxLogMessages,
      ...(retentionMs === undefined ? {} : { retentionMs }),
      ...(request.priority === undefined ? {} : { priority: request.priority }),
    });
    if (!result.ok) {
      if (result.reason === 'unknown_session') throw new NotFoundError(`unknown session "${sessionId}"`);
      if (result.reason === 'deleting') throw new ConflictError(`session "${sessionId}" is being deleted: the prompt was not stored`);
      if (result.reason === 'queue_full')
        throw new QuotaError(
          'maxQueuedPrompts',
          result.limit,
          `session "${sessionId}" already has ${result.count} prompts waiting (maxQueuedPrompts ${result.limit}): the prompt was not stored`,
        );
      throw new QuotaError(
        'maxLogMessages',
        result.limit,
        `session "${sessionId}" has ${result.count} messages stored, its message log is full (maxLogMessages ${result.limit}): the prompt was not stored`,
      );
    }
    const writes: Array<Promise<unknown>> = [];
    // Listed when new; active again, so not expiring (a revived session's clock restarts when it finishes).
    writes.push(
      this.#store.index(
        sessionId,
        {
          ...(result.created ? { created: true, state: 'queued' } : { touch: true }),
          expireAt: 'remove',
          ...(result.jobId !== null ? { activation: 'add' as const } : {}),
        },
        result.shard,
      ),
    );
    if (result.jobId !== null) writes.push(this.#queue.addActivation(sessionId, result.jobId, result.priority));
    await Promise.all(writes);
    // A new activation means nobody holds the session: there is no one to tell.
    if (result.jobId === null) await this.#bus.publish({ sessionId, kind: 'prompt' });
    return { sessionId, turn: result.turn, created: result.created };
  }

  /**
   * Re-runs the session's failed last turn as a new turn (a new series of attempts under the policy in
   * force): the same prompt and options; its first attempt continues the agent's conversation as a
   * retry would (see machines/retry-request.ts). NotFoundError for an unknown session; ConflictError
   * when the last turn did not fail, a prompt waits, a cancel is pending or the session is being deleted.
   */
  async retry(sessionId: string): Promise<{ sessionId: string; turn: number; retryOf: number }> {
    checkSessionId(sessionId);
    const view = await this.getSession(sessionId);
    if (view === null) throw new NotFoundError(`unknown session "${sessionId}"`);
    const turn = view.context?.turn ?? null;
    if (turn === null || turn.status !== 'failed')
      throw new ConflictError(`session "${sessionId}": its last turn ${turn === null ? 'does not exist' : `is ${turn.status}, not failed`}: there is nothing to retry`);
    const prompt = { id: randomUUID(), text: turn.text, options: turn.options, enqueuedAt: Date.now(), retryOf: turn.index };
    const result = await pushRetry(this.#store, sessionId, turn.index, prompt, newJobId(sessionId));
    if (!result.ok) {
      if (result.reason === 'unknown_session') throw new NotFoundError(`unknown session "${sessionId}"`);
      if (result.reason === 'deleting') throw new ConflictError(`session "${sessionId}" is being deleted`);
      if (result.reason === 'cancel_pending') throw new ConflictError(`session "${sessionId}" has a cancel pending: retry once it is applied`);
      if (result.reason === 'prompts_waiting')
        throw new ConflictError(`session "${sessionId}" has prompts waiting (${result.waiting}): a retry runs only right after the failed turn`);
      if (result.reason !== 'not_failed') throw new Error('unreachable');
      throw new ConflictError(
        `session "${sessionId}": turn ${turn.index} is no longer its failed last turn (now ${result.status}, turn ${result.turnIndex}): there is nothing to retry`,
      );
    }
    await this.#store.index(sessionId, { touch: true, expireAt: 'remove', ...(result.jobId !== null ? { activation: 'add' as const } : {}) });
    if (result.jobId !== null) await this.#queue.addActivation(sessionId, result.jobId);
    else await this.#bus.publish({ sessionId, kind: 'prompt' });
    return { sessionId, turn: result.turn, retryOf: turn.index };
  }

  /**
   * Resumes a session parked at a quota wall now, before the provider's reset: its next attempt starts
   * (under a fleet limit, once admitted). NotFoundError for an unknown session; ConflictError when it is
   * not parked (or is being deleted). Not to be confused with resumeDispatch (paused dispatch).
   */
  async resumeParked(sessionId: string): Promise<{ sessionId: string; turn: number; parkedUntil: number; delivered: 'worker' | 'activation' }> {
    checkSessionId(sessionId);
    const view = await this.getSession(sessionId);
    if (view === null) throw new NotFoundError(`unknown session "${sessionId}"`);
    const context = view.context;
    const wall = context?.turn?.quotaWall ?? null;
    if (view.state !== 'parked' || context === null || wall === null)
      throw new ConflictError(`session "${sessionId}" is ${view.state}, not parked at a quota wall: there is nothing to resume`);
    if (!(await requestResume(this.#store, sessionId, wallToken(context)))) throw new ConflictError(`session "${sessionId}" is being deleted`);
    await this.#bus.publish({ sessionId, kind: 'resume' });
    // Parked, nobody holds it: run its (delayed) activation now; its holder reads the request.
    const jobId = await this.#store.activeJobId(sessionId);
    const job = jobId === null ? undefined : await this.#queue.getJob(jobId);
    const delayed = job !== undefined && (await job.isDelayed());
    if (delayed) await job.promote().catch(() => undefined);
    return { sessionId, turn: context.turnIndex, parkedUntil: wall.until, delivered: delayed ? 'activation' : 'worker' };
  }

  /**
   * Cancels every session in `state` (queued, running or backoff), optionally only those of `agent`;
   * with `dryRun` only lists them. Served by the state's index, not a scan. InputError for a bad field.
   */
  async cancelMatching(filter: {
    state?: unknown;
    agent?: unknown;
    dryRun?: boolean;
    reason?: string;
    max?: number;
  }): Promise<{ dryRun: boolean; matched: Array<{ sessionId: string; state: string; agent: string }>; cancelled: number }> {
    const issues: Array<{ field: string; message: string }> = [];
    if (typeof filter.state !== 'string' || !(CANCELLABLE_STATES as readonly string[]).includes(filter.state))
      issues.push({ field: 'state', message: `must be one of ${CANCELLABLE_STATES.join(', ')} (got ${JSON.stringify(filter.state ?? null)})` });
    if (filter.agent !== undefined && (typeof filter.agent !== 'string' || filter.agent === '' || filter.agent.length > 100))
      issues.push({ field: 'agent', message: 'must be an agent name' });
    if (filter.max !== undefined && (!Number.isSafeInteger(filter.max) || filter.max < 1 || filter.max > BULK_CANCEL_MAX))
      issues.push({ field: 'max', message: `must be an integer from 1 to ${BULK_CANCEL_MAX}` });
    if (issues.length > 0) throw new InputError(issues);
    const matched = await selectForCancel(this.#redis, this.#keys, await this.#queue.fleetShards(), {
      state: filter.state as string,
      ...(typeof filter.agent === 'string' ? { agent: filter.agent } : {}),
      ...(filter.max === undefined ? {} : { max: filter.max }),
    });
    if (filter.dryRun === true) return { dryRun: true, matched, cancelled: 0 };
    let cancelled = 0;
    for (const s of matched) {
      // A session deleted meanwhile is simply not cancelled.
      const done = await this.cancel(s.sessionId, filter.reason ?? `bulk cancel (state ${String(filter.state)})`).then(
        () => true,
        (error: Error) => (error instanceof NotFoundError ? false : Promise.reject(error)),
      );
      if (done) cancelled += 1;
    }
    return { dryRun: false, matched, cancelled };
  }

  /** The prompts of the session waiting for their turn, in order. NotFoundError for an unknown session. */
  async queuedPrompts(sessionId: string): Promise<QueuedPrompt[]> {
    checkSessionId(sessionId);
    const [view, meta] = await Promise.all([this.getSession(sessionId), this.#store.meta(sessionId)]);
    if (view === null) throw new NotFoundError(`unknown session "${sessionId}"`);
    const removing = unqueueRequests(meta ?? {});
    const context = view.context;
    const started = new Set([...(context?.finishedPromptIds ?? []), ...(context?.turn === null || context?.turn === undefined ? [] : [context.turn.promptId])]);
    const seen = new Set<string>();
    const out: QueuedPrompt[] = [];
    const add = (p: { id: string; text: string; enqueuedAt?: number; retryOf?: number }, where: QueuedPrompt['where']): void => {
      const state = removing.get(p.id);
      if (seen.has(p.id) || started.has(p.id) || state === 'pending' || state === 'drop' || state === 'removed') return;
      seen.add(p.id);
      out.push({ position: out.length + 1, id: p.id, text: p.text, enqueuedAt: p.enqueuedAt ?? null, where, ...(p.retryOf === undefined ? {} : { retryOf: p.retryOf }) });
    };
    for (const p of context?.mailbox ?? []) add(p, 'mailbox');
    for (const p of await this.#store.inbox(sessionId)) if (p.removed !== true) add(p, 'inbox');
    return out;
  }

  /**
   * Removes a queued prompt, safe against a worker taking it meanwhile (see queued-prompts.ts).
   * NotFoundError: unknown session or no such queued prompt; ConflictError: its turn has started
   * (cancel it instead), or the session is being deleted, or its holder did not answer within `waitMs`.
   */
  async removeQueuedPrompt(sessionId: string, promptId: string, options: { waitMs?: number } = {}): Promise<{ sessionId: string; promptId: string; removed: true }> {
    checkSessionId(sessionId);
    if (!/^[A-Za-z0-9_.:-]{1,200}$/.test(promptId)) throw new InputError([{ field: 'promptId', message: `must be a prompt id as listed (got ${JSON.stringify(promptId)})` }]);
    const deadline = Date.now() + (options.waitMs ?? 10_000);
    const field = unqueueField(promptId);
    const meta = this.#store.key(sessionId, 'meta');
    for (;;) {
      const result = await removeQueued(this.#store, sessionId, promptId);
      if (result === 'removed') break;
      if (result === 'unknown_session') throw new NotFoundError(`unknown session "${sessionId}"`);
      if (result === 'deleting') throw new ConflictError(`session "${sessionId}" is being deleted`);
      if (result === 'started') throw new ConflictError(`prompt "${promptId}" of session "${sessionId}" is no longer queued: its turn has started (cancel the turn instead)`);
      if (result === 'unknown_prompt') throw new NotFoundError(`session "${sessionId}" has no queued prompt "${promptId}"`);
      // A worker holds the session: it decides, and says so in the meta.
      for (;;) {
        await this.#bus.publish({ sessionId, kind: 'unqueue' });
        await new Promise((resolve) => setTimeout(resolve, 100));
        const [outcome, held] = await Promise.all([this.#redis.hget(meta, field), this.#redis.exists(this.#store.key(sessionId, 'lease'))]);
        if (outcome === 'removed' || outcome === 'started') {
          await this.#redis.hdel(meta, field);
          if (outcome === 'started') throw new ConflictError(`prompt "${promptId}" of session "${sessionId}" is no longer queued: its turn has started (cancel the turn instead)`);
          return { sessionId, promptId, removed: true };
        }
        // The holder let go before answering: decide again, as for a session nobody holds.
        if (outcome === 'pending' && held === 0) break;
        if (Date.now() > deadline)
          throw new ConflictError(
            `the worker holding session "${sessionId}" did not answer within ${options.waitMs ?? 10_000} ms: the removal of prompt "${promptId}" stays pending and is decided when a worker next drives the session`,
          );
      }
    }
    await this.#store.index(sessionId, { touch: true });
    return { sessionId, promptId, removed: true };
  }

  /** What callers of this deployment may choose. */
  get deploymentPolicy(): DeploymentPolicy {
    if (this.#policy === undefined) throw new Error('Runtime.deploymentPolicy: no policy given (read it with resolvedPolicy())');
    return this.#policy;
  }

  /** The deployment policy: the one given, else the default (this process's cwd as the workspace), resolved once. */
  async #deploymentPolicy(): Promise<DeploymentPolicy> {
    this.#policy ??= this.#loadPolicy !== undefined ? await this.#loadPolicy() : (await import('./deployment-policy.ts')).deploymentPolicy();
    return this.#policy;
  }

  /** What callers of this deployment may choose (the default policy, resolved on first use, when none was given). */
  resolvedPolicy(): Promise<DeploymentPolicy> {
    return this.#deploymentPolicy();
  }

  /** A caller's retention for a session, in ms (0: forever), within the deployment's maximum. */
  #retention(value: string | number): number {
    const parsed = typeof value === 'number' ? { ok: true as const, ms: value } : parseDuration(value);
    if (!parsed.ok) throw new InputError([{ field: 'retention', message: parsed.message }]);
    const max = this.#limits.maxRetentionMs;
    if (max > 0 && (parsed.ms === 0 || parsed.ms > max))
      throw new InputError([
        { field: 'retention', message: `must be at most ${max} ms (the deployment's maximum retention)${parsed.ms === 0 ? '; 0 (forever) is not allowed' : ''}` },
      ]);
    return parsed.ms;
  }

  /**
   * Deletes a session fleet-wide: without `force` only a finished one (else ConflictError); with
   * `force` a running turn is cancelled first (its process tree gone). Deleting again within the
   * hour is not an error (`already: true`); an id never seen is a NotFoundError.
   */
  /**
   * Deletes the session fleet-wide. Every call that gets as far as the session (deleted, already
   * deleted, refused as active) is recorded in the deletion audit stream with `actor` (who asked:
   * a token's name, `cli:user@host`…); an unknown id is not.
   */
  async deleteSession(sessionId: string, options: { force?: boolean; waitMs?: number; actor?: string } = {}): Promise<{ sessionId: string; deleted: boolean; cancelled: boolean }> {
    checkSessionId(sessionId);
    const result = await removeSession({ redis: this.#redis, keys: this.#keys, queue: this.#queue, publish: (event) => this.#bus.publish(event) }, sessionId, {
      mode: options.force === true ? 'force' : 'finished',
      tombstoneMs: 3_600_000,
      ...(options.waitMs === undefined ? {} : { waitMs: options.waitMs }),
    });
    if (result.outcome === 'unknown') throw new NotFoundError(`unknown session "${sessionId}"`);
    const outcome = result.outcome === 'active' ? 'refused' : result.outcome === 'removed' ? 'deleted' : 'already-deleted';
    await this.#redis.xadd(
      lifecycleKeys(this.#keys).deletions,
      'MAXLEN',
      '~',
      AUDIT_MAX,
      '*',
      ...[
        'sessionId',
        sessionId,
        'actor',
        options.actor ?? 'unknown',
        'force',
        String(options.force === true),
        'outcome',
        outcome,
        'cancelled',
        String(result.outcome === 'removed' && result.cancelled),
      ],
    );
    if (result.outcome === 'active')
      throw new ConflictError(`session "${sessionId}" is active (state ${result.state}, or prompts waiting): cancel its turn first, or delete with force`);
    if (result.outcome === 'removed') return { sessionId, deleted: true, cancelled: result.cancelled };
    return { sessionId, deleted: false, cancelled: false };
  }

  /** The deletion audit stream, newest first (at most `limit` entries; about AUDIT_MAX are kept). */
  async deletions(limit = 100): Promise<Array<{ at: number; sessionId: string; actor: string; force: boolean; outcome: string; cancelled: boolean }>> {
    const entries = (await this.#redis.xrevrange(lifecycleKeys(this.#keys).deletions, '+', '-', 'COUNT', Math.max(1, limit))) as Array<[string, string[]]>;
    return entries.map(([id, flat]) => {
      const f: Record<string, string> = {};
      for (let i = 0; i + 1 < flat.length; i += 2) f[flat[i] as string] = flat[i + 1] as string;
      return {
        at: Number(id.split('-')[0]),
        sessionId: f['sessionId'] ?? '',
        actor: f['actor'] ?? 'unknown',
        force: f['force'] === 'true',
        outcome: f['outcome'] ?? '',
        cancelled: f['cancelled'] === 'true',
      };
    });
  }

  /** Cancels the session's current turn, wherever it runs. Throws NotFoundError for an unknown session. */
  async cancel(sessionId: string, reason = 'cancelled by operator'): Promise<{ delivered: 'worker' | 'activation' }> {
    checkSessionId(sessionId);
    const { code, jobId } = await this.#store.requestCancel(sessionId, reason, newJobId(sessionId));
    if (code === -1) throw new NotFoundError(`unknown session "${sessionId}"`);
    await this.#bus.publish({ sessionId, kind: 'cancel' });
    if (code === 2) {
      // Parked in a long backoff: run its activation now, so the cancel does not wait for nextRetryAt.
      const job = await this.#queue.getJob(jobId);
      if (job !== undefined && (await job.isDelayed())) await job.promote().catch(() => undefined);
    }
    if (code === 3) {
      await this.#store.index(sessionId, { activation: 'add' });
      await this.#queue.addActivation(sessionId, jobId);
    }
    return { delivered: code === 1 ? 'worker' : 'activation' };
  }

  async getSession(sessionId: string): Promise<SessionView | null> {
    if (!SESSION_ID_PATTERN.test(sessionId)) return null;
    const view = await this.#store.view(sessionId);
    if (view === null) return null;
    const { meta, snapshot: snapshotRaw, inbox, history, lastSeq, heldBy, cancel } = view;
    const approvals = await this.#approvals.list(sessionId);
    const persisted = snapshotRaw === null ? null : (JSON.parse(snapshotRaw) as PersistedSession);
    return {
      sessionId,
      state: meta.state ?? 'queued',
      createdAt: Number(meta.createdAt),
      updatedAt: Number(meta.updatedAt ?? meta.createdAt),
      agent: meta.agent ?? DEFAULT_AGENT,
      options: safeJson(meta.options) as Record<string, unknown>,
      policyOverride: meta.policy ? (safeJson(meta.policy) as RetryPolicy) : null,
      context: persisted?.snapshot.context ?? null,
      queued: inbox.filter((p) => p.removed !== true).map((p) => ({ id: p.id, text: p.text, enqueuedAt: p.enqueuedAt })),
      history: history as SessionView['history'],
      lastSeq,
      heldBy,
      cancelRequested: cancel !== null,
      approvals,
      usage: sessionUsage(meta),
    };
  }

  /**
   * An operator's answer to a permission request of the session (`by`: who, as the audit names
   * them). The first decision wins; the worker holding the session gives it to the agent (once),
   * or — nobody holds it — the next activation does when its agent asks again. Refused with nothing
   * written: InputError (a bad id, an option the agent did not offer for this verdict),
   * NotFoundError (unknown session or request), ConflictError (already decided).
   */
  async decideApproval(
    sessionId: string,
    requestId: string,
    verdict: ApprovalVerdict,
    by: string,
    option?: string,
    reason?: string,
  ): Promise<{ sessionId: string; requestId: string; outcome: 'allowed' | 'denied'; optionId: string | null; by: string; at: number }> {
    checkSessionId(sessionId);
    if (!REQUEST_ID_PATTERN.test(requestId))
      throw new InputError([{ field: 'requestId', message: `must be an approval request id such as t1-0123456789ab-1 (got ${JSON.stringify(requestId.slice(0, 100))})` }]);
    if (reason !== undefined && reason.length > 1000) throw new InputError([{ field: 'reason', message: 'must be at most 1000 characters' }]);
    const stored = await this.#approvals.get(sessionId, requestId);
    if (stored === null) {
      if ((await this.#store.meta(sessionId)) === null) throw new NotFoundError(`unknown session "${sessionId}"`);
      throw new NotFoundError(`session "${sessionId}" has no approval request "${requestId}" (its turn may be over)`);
    }
    const chosen = chooseOption(stored.request.options, verdict, option);
    if (!chosen.ok) throw new InputError([{ field: 'option', message: chosen.message }]);
    const at = Date.now();
    const outcome = verdict === 'allow' ? 'allowed' : 'denied';
    const result = await this.#approvals.decide(sessionId, requestId, { outcome, optionId: chosen.optionId, by, at, ...(reason === undefined ? {} : { reason }) });
    if (!result.found) throw new NotFoundError(`session "${sessionId}" has no approval request "${requestId}"`);
    if (!result.decided) throw new ConflictError(`approval request "${requestId}" was already decided (${result.decision.outcome} by ${result.decision.by})`);
    await this.#approvals.markAnswered(sessionId, requestId);
    await this.#bus.publish({ sessionId, kind: 'approval' });
    return { sessionId, requestId, outcome, optionId: chosen.optionId, by, at };
  }

  /** The newest `limit` sessions (default 1000), optionally only those in `state` (served by the state's index). */
  async listSessions(filter: { state?: string; limit?: number } = {}): Promise<Array<{ sessionId: string; state: string }>> {
    return (await this.listPage({ ...filter, limit: filter.limit ?? 1000 })).sessions;
  }

  /** A page of sessions, newest first, from `cursor` (the `next` of the previous page); InputError for a bad cursor. */
  async listPage(filter: ListFilter = {}): Promise<ListPage> {
    try {
      return await listPage(this.#redis, this.#keys, filter, await this.#queue.fleetShards());
    } catch (error) {
      if (hasErrorCode(error, 'invalid_cursor')) throw new InputError([{ field: 'cursor', message: error.message }]);
      throw error;
    }
  }

  /** The session as a versioned JSON-lines archive (see lifecycle/archive.ts). NotFoundError for an unknown id. */
  async exportSession(sessionId: string): Promise<string> {
    checkSessionId(sessionId);
    const { exportSession } = await import('./lifecycle/transfer.ts');
    const archive = await exportSession(this.#redis, this.#keys, sessionId);
    if (archive === null) throw new NotFoundError(`unknown session "${sessionId}"`);
    return archive;
  }

  /** Restores an archive (as `as`, default its own id). ArchiveError (nothing written) or ConflictError (the id exists). */
  async importSession(text: string, options: { as?: string } = {}): Promise<ImportResult> {
    const { importSession } = await import('./lifecycle/transfer.ts');
    return importSession(this.#store, this.#queue, text, options);
  }

  /** A number that changes whenever anything shown in the listing changes (for ETags). */
  async listingVersion(): Promise<string> {
    // One counter per index shard, each only ever going up: their sum changes whenever one does.
    const shards = await this.#queue.fleetShards();
    const versions = await Promise.all(Array.from({ length: shards }, (_, n) => this.#redis.get(lifecycleKeys(this.#keys, n).version)));
    return String(versions.reduce((sum, v) => sum + Number(v ?? 0), 0));
  }

  /** Each session's state as its own record says it (written in the same fenced script as its snapshot), in one pipeline; null for an unknown id. */
  async sessionStates(ids: readonly string[]): Promise<Record<string, string | null>> {
    if (ids.length === 0) return {};
    const states = await hgetEach(
      this.#redis,
      ids.map((id) => this.#store.key(id, 'meta')),
      'state',
    );
    return Object.fromEntries(ids.map((id, i) => [id, states[i] ?? null]));
  }

  async readMessages(sessionId: string, fromSeq = 1, count = 1000): Promise<StoredMessage[]> {
    checkSessionId(sessionId);
    return this.#store.readMessages(sessionId, fromSeq, count);
  }

  /**
   * Every message from `fromSeq` on, then new ones as they are written, until
   * the signal aborts. Uses its own blocking connection.
   */
  async *followMessages(sessionId: string, fromSeq: number, signal: AbortSignal): AsyncGenerator<StoredMessage> {
    checkSessionId(sessionId);
    const reader = this.#connect('follow');
    const stop = (): void => reader.disconnect();
    signal.addEventListener('abort', stop, { once: true });
    let next = Math.max(1, fromSeq);
    try {
      while (!signal.aborted) {
        const batch = await reader.xread('COUNT', 500, 'BLOCK', 1000, 'STREAMS', this.#store.key(sessionId, 'log'), `${next - 1}-0`).catch((error: Error) => {
          if (signal.aborted) return null;
          throw error;
        });
        if (batch === null) continue;
        for (const [, entries] of batch) {
          for (const [, fields] of entries) {
            const message = parseEntry(fields);
            next = message.seq + 1;
            yield message;
          }
        }
      }
    } finally {
      signal.removeEventListener('abort', stop);
      reader.disconnect();
    }
  }

  async getPolicy(sessionId?: string): Promise<{ policy: RetryPolicy; source: 'session' | 'global' | 'default' }> {
    if (sessionId !== undefined) {
      checkSessionId(sessionId);
      const meta = await this.#store.meta(sessionId);
      if (meta === null) throw new NotFoundError(`unknown session "${sessionId}"`);
      if (meta.policy) return { policy: safeJson(meta.policy) as RetryPolicy, source: 'session' };
    }
    const stored = await this.#redis.exists(this.#keys.policy);
    return { policy: await this.#policies.get(), source: stored ? 'global' : 'default' };
  }

  /** Validates `patch` over the policy in force; on error nothing is changed. */
  async setPolicy(patch: unknown, sessionId?: string): Promise<RetryPolicyResult> {
    // The deployment's maxTurnMs wins over any stored policy, the global one included.
    const { parkLimitIssues, turnLimitIssue } = await import('./deployment-policy.ts');
    const deployment = await this.#deploymentPolicy();
    const overLimit = turnLimitIssue(patch, deployment, 'maxTurnMs');
    if (overLimit !== null) return { ok: false, errors: [{ field: 'maxTurnMs', message: `maxTurnMs: ${overLimit.message}` }] };
    const overPark = parkLimitIssues(patch, deployment, '');
    if (overPark.length > 0) return { ok: false, errors: overPark.map((i) => ({ field: i.field, message: `${i.field}: ${i.message}` })) };
    if (sessionId === undefined) {
      this.#policies.invalidate();
      const result = await this.#policies.update(patch);
      if (result.ok) await this.#bus.publish({ sessionId: '*', kind: 'policy' });
      return result;
    }
    const { policy } = await this.getPolicy(sessionId);
    const { mergeRetryPolicy } = await import('../retry/policy.ts');
    const result = mergeRetryPolicy(policy, patch);
    if (result.ok) {
      // Only into a session that still exists and is not being deleted (a bare HSET after a delete would leave half a session).
      const set = await this.#redis.eval(SET_POLICY, 1, this.#store.key(sessionId, 'meta'), JSON.stringify(result.policy));
      if (set === 0) throw new NotFoundError(`unknown session "${sessionId}"`);
      await this.#bus.publish({ sessionId, kind: 'policy' });
    }
    return result;
  }

  async resetPolicy(sessionId?: string): Promise<RetryPolicy> {
    if (sessionId === undefined) {
      const policy = await this.#policies.reset();
      await this.#bus.publish({ sessionId: '*', kind: 'policy' });
      return policy;
    }
    checkSessionId(sessionId);
    if ((await this.#store.meta(sessionId)) === null) throw new NotFoundError(`unknown session "${sessionId}"`);
    await this.#redis.hdel(this.#store.key(sessionId, 'meta'), 'policy');
    await this.#bus.publish({ sessionId, kind: 'policy' });
    return (await this.getPolicy(sessionId)).policy;
  }

  async workers(): Promise<WorkerHeartbeat[]> {
    const raw = await this.#redis.hgetall(this.#keys.workers);
    return Object.values(raw).map((v) => JSON.parse(v) as WorkerHeartbeat);
  }

  /**
   * Live message logs for many followers on one blocking connection (the HTTP
   * event streams): see MessageHub. Made on first use, closed with the runtime.
   */
  get messageHub(): MessageHub {
    this.#hub ??= new MessageHub({
      connect: () => this.#connect('stream-hub'),
      redis: this.#redis,
      logKey: (id) => this.#store.key(id, 'log'),
      existsKey: (id) => this.#store.key(id, 'meta'),
    });
    return this.#hub;
  }

  async close(): Promise<void> {
    await this.#hub?.close();
    await this.#queue.close();
    await this.#redis.quit().catch(() => undefined);
  }
}

function checkSessionId(sessionId: string): void {
  if (!SESSION_ID_PATTERN.test(sessionId))
    throw new InputError([{ field: 'sessionId', message: `must be 1-100 letters, digits or _.-, and not . or .. (got ${JSON.stringify(sessionId)})` }]);
}

function safeJson(raw: string | undefined): unknown {
  if (raw === undefined) return {};
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    return {};
  }
}
