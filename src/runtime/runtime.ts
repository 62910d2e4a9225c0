import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import type { PersistedSession } from '../../machines/restore.ts';
import type { SessionContext } from '../../machines/types.ts';
import { mergeRetryPolicy, DEFAULT_RETRY_POLICY, type RetryPolicy, type RetryPolicyResult } from '../retry/index.ts';
import { EventBus } from './event-bus.ts';
import { MessageHub } from './message-hub.ts';
import { createKeys, SESSION_ID_PATTERN, type Keys } from './keys.ts';
import { PolicyStore } from './policy-store.ts';
import { createSessionQueue, newJobId, type SessionQueue } from './queue.ts';
import { parseEntry, SessionStore, type StoredMessage } from './store/session-store.ts';
import type { DeploymentPolicy } from '../policy/index.ts';
import { admitTurn, deploymentPolicy } from './deployment-policy.ts';
import { DEFAULT_AGENT, TurnOptionsSchema } from './turn-options.ts';
import { parseDuration } from '../config/duration.ts';
import { ConflictError, QuotaError } from './lifecycle/errors.ts';
import { LIFECYCLE_DEFAULTS, type LifecycleLimits } from './lifecycle/limits.ts';
import { removeSession } from './lifecycle/remove.ts';
import { lifecycleKeys } from './lifecycle/keys.ts';
import { exportSession, importSession } from './lifecycle/transfer.ts';
import { CursorError, listPage, type ListFilter, type ListPage } from './lifecycle/listing.ts';
import { ApprovalStore, type StoredApproval } from './approvals/store.ts';
import { chooseOption, REQUEST_ID_PATTERN, type ApprovalVerdict } from './approvals/decide.ts';

/** A request or argument that the runtime refuses; `issues` name the fields. Nothing was written. */
export class InputError extends Error {
  override readonly name = 'InputError';
  readonly issues: Array<{ field: string; message: string }>;
  constructor(issues: Array<{ field: string; message: string }>) {
    super(issues.map((i) => `${i.field}: ${i.message}`).join('; '));
    this.issues = issues;
  }
}

export class NotFoundError extends Error {
  override readonly name = 'NotFoundError';
}

/** KEYS: meta. ARGV: policyJson. → 1 set | 0 no such session, or one being deleted. */
const SET_POLICY = `
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], 'deleting') == 1 then return 0 end
redis.call('HSET', KEYS[1], 'policy', ARGV[1])
return 1
`;

export const EnqueueRequestSchema = z.strictObject({
  sessionId: z.string().regex(SESSION_ID_PATTERN, 'must be 1-100 letters, digits or _.-, and not . or ..').optional(),
  // Its maximum length is the deployment policy's (maxPromptChars).
  prompt: z.string().refine((p) => p.trim() !== '', 'must not be empty'),
  options: TurnOptionsSchema.optional(),
  retryPolicy: z.record(z.string(), z.unknown()).optional(),
  /** How long the session is kept once finished (a duration, `0`: forever), within the deployment's maximum. */
  retention: z.union([z.string(), z.number().int().nonnegative()]).optional(),
});
export type EnqueueRequest = z.input<typeof EnqueueRequestSchema>;

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
  history: Array<{ at: number; from: string; to: string; event: string }>;
  lastSeq: number;
  heldBy: string | null;
  cancelRequested: boolean;
  /** The permission requests of the session's current turn (decided ones included). */
  approvals: StoredApproval[];
}

export interface WorkerHeartbeat {
  id: string;
  host: string;
  pid: number;
  lastSeen: number;
  active: number;
  /** How the worker contains its attempts' processes (absent from workers older than this field). */
  containment?: { mode: 'cgroup' | 'sweep'; detail: string };
}

export interface RuntimeOptions {
  connect: (role: string) => Redis;
  prefix?: string;
  /** What callers may choose (src/policy); default: the default policy with this process's cwd as the workspace. */
  policy?: DeploymentPolicy;
  /** The deployment's retention and quotas (defaults: LIFECYCLE_DEFAULTS). */
  limits?: Partial<LifecycleLimits>;
}

/**
 * What the interfaces (CLI, HTTP, dashboard) call: enqueue, cancel, inspect,
 * read messages, configure the retry policy. Contract: input is validated first
 * and refused with an InputError naming the field, with nothing written.
 */
export class Runtime {
  readonly keys: Keys;
  readonly redis: Redis;
  readonly store: SessionStore;
  readonly queue: SessionQueue;
  readonly policies: PolicyStore;
  readonly approvals: ApprovalStore;
  readonly #bus: EventBus;
  readonly #policy: DeploymentPolicy;
  readonly #connect: (role: string) => Redis;
  readonly #extra: Redis[] = [];
  #hub: MessageHub | null = null;
  readonly limits: LifecycleLimits;

  constructor(options: RuntimeOptions) {
    this.keys = createKeys(options.prefix ?? 'sessiond');
    this.#connect = options.connect;
    this.#policy = options.policy ?? deploymentPolicy();
    this.redis = options.connect('runtime');
    this.limits = { ...LIFECYCLE_DEFAULTS, ...options.limits };
    this.store = new SessionStore(this.redis, this.keys, { retentionMs: this.limits.retentionMs });
    this.queue = createSessionQueue(options.connect('runtime-queue'), this.keys);
    this.policies = new PolicyStore(this.redis, this.keys);
    this.approvals = new ApprovalStore(this.redis, this.keys);
    // Publishing only: the subscriber connection is made lazily by those who listen.
    this.#bus = new EventBus(this.redis, this.redis, this.keys);
  }

  /**
   * Adds a prompt (creating the session unless `mustExist`). Refused with nothing written: InputError
   * (a bad field), NotFoundError (mustExist, unknown), ConflictError (being deleted), QuotaError (a limit).
   */
  async enqueue(input: unknown, how: { mustExist?: boolean } = {}): Promise<{ sessionId: string; turn: number; created: boolean }> {
    const parsed = EnqueueRequestSchema.safeParse(input);
    if (!parsed.success) throw new InputError(zodIssues(parsed.error));
    const request = parsed.data;
    let policyJson: string | null = null;
    if (request.retryPolicy !== undefined) {
      const policy = mergeRetryPolicy(DEFAULT_RETRY_POLICY, request.retryPolicy);
      if (!policy.ok) throw new InputError(policy.errors.map((e) => ({ field: `retryPolicy.${e.field}`, message: e.message })));
      policyJson = JSON.stringify(policy.policy);
    }
    const retentionMs = request.retention === undefined ? undefined : this.#retention(request.retention);
    const options = request.options ?? {};
    // The deployment's policy before anything is written; the worker checks the stored request again.
    const admitted = await admitTurn(this.#policy, options, request.prompt);
    if (!admitted.ok) throw new InputError(admitted.issues);
    const sessionId = request.sessionId ?? randomUUID();
    const create = { agent: typeof options.agent === 'string' ? options.agent : DEFAULT_AGENT, options: JSON.stringify(options) };
    const jobId = newJobId(sessionId);
    const prompt = { id: randomUUID(), text: request.prompt, options, enqueuedAt: Date.now() };
    const result = await this.store.enqueue(sessionId, create, prompt, policyJson, jobId, {
      ...(how.mustExist === true ? { mustExist: true } : {}),
      maxQueued: this.limits.maxQueuedPrompts,
      maxLog: this.limits.maxLogMessages,
      ...(retentionMs === undefined ? {} : { retentionMs }),
    });
    if (!result.ok) {
      if (result.reason === 'unknown_session') throw new NotFoundError(`unknown session "${sessionId}"`);
      if (result.reason === 'deleting') throw new ConflictError(`session "${sessionId}" is being deleted: the prompt was not stored`);
      if (result.reason === 'queue_full') throw new QuotaError('maxQueuedPrompts', result.limit, `session "${sessionId}" already has ${result.count} prompts waiting (maxQueuedPrompts ${result.limit}): the prompt was not stored`);
      throw new QuotaError('maxLogMessages', result.limit, `session "${sessionId}" has ${result.count} messages stored, its message log is full (maxLogMessages ${result.limit}): the prompt was not stored`);
    }
    const writes: Array<Promise<unknown>> = [];
    // Listed when new; active again, so not expiring (a revived session's clock restarts when it finishes).
    writes.push(this.store.index(sessionId, { ...(result.created ? { created: true, state: 'queued' } : { touch: true }), expireAt: 'remove', ...(result.jobId !== null ? { activation: 'add' as const } : {}) }));
    if (result.jobId !== null) writes.push(this.queue.addActivation(sessionId, result.jobId));
    await Promise.all(writes);
    // A new activation means nobody holds the session: there is no one to tell.
    if (result.jobId === null) await this.#bus.publish({ sessionId, kind: 'prompt' });
    return { sessionId, turn: result.turn, created: result.created };
  }

  /** What callers of this deployment may choose. */
  get deploymentPolicy(): DeploymentPolicy {
    return this.#policy;
  }

  /** A caller's retention for a session, in ms (0: forever), within the deployment's maximum. */
  #retention(value: string | number): number {
    const parsed = typeof value === 'number' ? { ok: true as const, ms: value } : parseDuration(value);
    if (!parsed.ok) throw new InputError([{ field: 'retention', message: parsed.message }]);
    const max = this.limits.maxRetentionMs;
    if (max > 0 && (parsed.ms === 0 || parsed.ms > max)) throw new InputError([{ field: 'retention', message: `must be at most ${max} ms (the deployment's maximum retention)${parsed.ms === 0 ? '; 0 (forever) is not allowed' : ''}` }]);
    return parsed.ms;
  }

  /**
   * Deletes a session fleet-wide: without `force` only a finished one (else ConflictError); with
   * `force` a running turn is cancelled first (its process tree gone). Deleting again within the
   * hour is not an error (`already: true`); an id never seen is a NotFoundError.
   */
  async deleteSession(sessionId: string, options: { force?: boolean; waitMs?: number } = {}): Promise<{ sessionId: string; deleted: boolean; cancelled: boolean }> {
    checkSessionId(sessionId);
    const result = await removeSession(
      { redis: this.redis, keys: this.keys, queue: this.queue, publish: (event) => this.#bus.publish(event) },
      sessionId,
      { mode: options.force === true ? 'force' : 'finished', tombstoneMs: 3_600_000, ...(options.waitMs === undefined ? {} : { waitMs: options.waitMs }) },
    );
    if (result.outcome === 'unknown') throw new NotFoundError(`unknown session "${sessionId}"`);
    if (result.outcome === 'active') throw new ConflictError(`session "${sessionId}" is active (state ${result.state}, or prompts waiting): cancel its turn first, or delete with force`);
    if (result.outcome === 'removed') return { sessionId, deleted: true, cancelled: result.cancelled };
    return { sessionId, deleted: false, cancelled: false };
  }

  /** Cancels the session's current turn, wherever it runs. Throws NotFoundError for an unknown session. */
  async cancel(sessionId: string, reason = 'cancelled by operator'): Promise<{ delivered: 'worker' | 'activation' }> {
    checkSessionId(sessionId);
    const { code, jobId } = await this.store.requestCancel(sessionId, reason, newJobId(sessionId));
    if (code === -1) throw new NotFoundError(`unknown session "${sessionId}"`);
    await this.#bus.publish({ sessionId, kind: 'cancel' });
    if (code === 2) {
      // Parked in a long backoff: run its activation now, so the cancel does not wait for nextRetryAt.
      const job = await this.queue.queue.getJob(jobId);
      if (job !== undefined && (await job.isDelayed())) await job.promote().catch(() => undefined);
    }
    if (code === 3) {
      await this.store.index(sessionId, { activation: 'add' });
      await this.queue.addActivation(sessionId, jobId);
    }
    return { delivered: code === 1 ? 'worker' : 'activation' };
  }

  async getSession(sessionId: string): Promise<SessionView | null> {
    if (!SESSION_ID_PATTERN.test(sessionId)) return null;
    const view = await this.store.view(sessionId);
    if (view === null) return null;
    const { meta, snapshot: snapshotRaw, inbox, history, lastSeq, heldBy, cancel } = view;
    const approvals = await this.approvals.list(sessionId);
    const persisted = snapshotRaw === null ? null : (JSON.parse(snapshotRaw) as PersistedSession);
    return {
      sessionId,
      state: meta.state ?? 'queued',
      createdAt: Number(meta.createdAt),
      updatedAt: Number(meta.updatedAt ?? meta.createdAt),
      agent: meta.agent ?? 'pi',
      options: safeJson(meta.options) as Record<string, unknown>,
      policyOverride: meta.policy ? (safeJson(meta.policy) as RetryPolicy) : null,
      context: persisted?.snapshot.context ?? null,
      queued: inbox.map((p) => ({ id: p.id, text: p.text, enqueuedAt: p.enqueuedAt })),
      history: history as SessionView['history'],
      lastSeq,
      heldBy,
      cancelRequested: cancel !== null,
      approvals,
    };
  }

  /**
   * An operator's answer to a permission request of the session (`by`: who, as the audit names
   * them). The first decision wins; the worker holding the session gives it to the agent (once),
   * or — nobody holds it — the next activation does when its agent asks again. Refused with nothing
   * written: InputError (a bad id, an option the agent did not offer for this verdict),
   * NotFoundError (unknown session or request), ConflictError (already decided).
   */
  async decideApproval(sessionId: string, requestId: string, verdict: ApprovalVerdict, by: string, option?: string, reason?: string): Promise<{ sessionId: string; requestId: string; outcome: 'allowed' | 'denied'; optionId: string | null; by: string; at: number }> {
    checkSessionId(sessionId);
    if (!REQUEST_ID_PATTERN.test(requestId)) throw new InputError([{ field: 'requestId', message: `must be an approval request id such as t1-0123456789ab-1 (got ${JSON.stringify(requestId.slice(0, 100))})` }]);
    if (reason !== undefined && reason.length > 1000) throw new InputError([{ field: 'reason', message: 'must be at most 1000 characters' }]);
    const stored = await this.approvals.get(sessionId, requestId);
    if (stored === null) {
      if ((await this.store.meta(sessionId)) === null) throw new NotFoundError(`unknown session "${sessionId}"`);
      throw new NotFoundError(`session "${sessionId}" has no approval request "${requestId}" (its turn may be over)`);
    }
    const chosen = chooseOption(stored.request.options, verdict, option);
    if (!chosen.ok) throw new InputError([{ field: 'option', message: chosen.message }]);
    const at = Date.now();
    const outcome = verdict === 'allow' ? 'allowed' : 'denied';
    const result = await this.approvals.decide(sessionId, requestId, { outcome, optionId: chosen.optionId, by, at, ...(reason === undefined ? {} : { reason }) });
    if (!result.found) throw new NotFoundError(`session "${sessionId}" has no approval request "${requestId}"`);
    if (!result.decided) throw new ConflictError(`approval request "${requestId}" was already decided (${result.decision.outcome} by ${result.decision.by})`);
    await this.approvals.markAnswered(sessionId, requestId);
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
      return await listPage(this.redis, this.keys, filter);
    } catch (error) {
      if (error instanceof CursorError) throw new InputError([{ field: 'cursor', message: error.message }]);
      throw error;
    }
  }

  /** The session as a versioned JSON-lines archive (see lifecycle/archive.ts). NotFoundError for an unknown id. */
  async exportSession(sessionId: string): Promise<string> {
    checkSessionId(sessionId);
    const archive = await exportSession(this.redis, this.keys, sessionId);
    if (archive === null) throw new NotFoundError(`unknown session "${sessionId}"`);
    return archive;
  }

  /** Restores an archive (as `as`, default its own id). ArchiveError (nothing written) or ConflictError (the id exists). */
  async importSession(text: string, options: { as?: string } = {}): Promise<{ sessionId: string; messages: number; state: string }> {
    return importSession(this.store, this.queue, text, options);
  }

  /** A number that changes whenever anything shown in the listing changes (for ETags). */
  async listingVersion(): Promise<string> {
    return (await this.redis.get(lifecycleKeys(this.keys).version)) ?? '0';
  }

  /** Each session's state as its own record says it (written in the same fenced script as its snapshot), in one pipeline; null for an unknown id. */
  async sessionStates(ids: readonly string[]): Promise<Record<string, string | null>> {
    if (ids.length === 0) return {};
    const pipeline = this.redis.pipeline();
    for (const id of ids) pipeline.hget(this.store.key(id, 'meta'), 'state');
    const replies = (await pipeline.exec()) ?? [];
    return Object.fromEntries(ids.map((id, i) => [id, (replies[i]?.[1] as string | null | undefined) ?? null]));
  }

  async readMessages(sessionId: string, fromSeq = 1, count = 1000): Promise<StoredMessage[]> {
    checkSessionId(sessionId);
    return this.store.readMessages(sessionId, fromSeq, count);
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
        const batch = await reader.xread('COUNT', 500, 'BLOCK', 1000, 'STREAMS', this.store.key(sessionId, 'log'), `${next - 1}-0`).catch((error: Error) => {
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
      const meta = await this.store.meta(sessionId);
      if (meta === null) throw new NotFoundError(`unknown session "${sessionId}"`);
      if (meta.policy) return { policy: safeJson(meta.policy) as RetryPolicy, source: 'session' };
    }
    const stored = await this.redis.exists(this.keys.policy);
    return { policy: await this.policies.get(), source: stored ? 'global' : 'default' };
  }

  /** Validates `patch` over the policy in force; on error nothing is changed. */
  async setPolicy(patch: unknown, sessionId?: string): Promise<RetryPolicyResult> {
    if (sessionId === undefined) {
      this.policies.invalidate();
      const result = await this.policies.update(patch);
      if (result.ok) await this.#bus.publish({ sessionId: '*', kind: 'policy' });
      return result;
    }
    const { policy } = await this.getPolicy(sessionId);
    const result = mergeRetryPolicy(policy, patch);
    if (result.ok) {
      // Only into a session that still exists and is not being deleted (a bare HSET after a delete would leave half a session).
      const set = await this.redis.eval(SET_POLICY, 1, this.store.key(sessionId, 'meta'), JSON.stringify(result.policy));
      if (set === 0) throw new NotFoundError(`unknown session "${sessionId}"`);
      await this.#bus.publish({ sessionId, kind: 'policy' });
    }
    return result;
  }

  async resetPolicy(sessionId?: string): Promise<RetryPolicy> {
    if (sessionId === undefined) {
      const policy = await this.policies.reset();
      await this.#bus.publish({ sessionId: '*', kind: 'policy' });
      return policy;
    }
    checkSessionId(sessionId);
    if ((await this.store.meta(sessionId)) === null) throw new NotFoundError(`unknown session "${sessionId}"`);
    await this.redis.hdel(this.store.key(sessionId, 'meta'), 'policy');
    await this.#bus.publish({ sessionId, kind: 'policy' });
    return (await this.getPolicy(sessionId)).policy;
  }

  async workers(): Promise<WorkerHeartbeat[]> {
    const raw = await this.redis.hgetall(this.keys.workers);
    return Object.values(raw).map((v) => JSON.parse(v) as WorkerHeartbeat);
  }

  /**
   * Live message logs for many followers on one blocking connection (the HTTP
   * event streams): see MessageHub. Made on first use, closed with the runtime.
   */
  get messageHub(): MessageHub {
    this.#hub ??= new MessageHub({ connect: () => this.#connect('stream-hub'), redis: this.redis, logKey: (id) => this.store.key(id, 'log') });
    return this.#hub;
  }

  async close(): Promise<void> {
    await this.#hub?.close();
    await this.queue.close();
    for (const r of this.#extra) r.disconnect();
    await this.redis.quit().catch(() => undefined);
  }
}

function checkSessionId(sessionId: string): void {
  if (!SESSION_ID_PATTERN.test(sessionId)) throw new InputError([{ field: 'sessionId', message: `must be 1-100 letters, digits or _.-, and not . or .. (got ${JSON.stringify(sessionId)})` }]);
}

export function zodIssues(error: z.ZodError): Array<{ field: string; message: string }> {
  return error.issues.map((issue) => ({ field: issue.path.join('.') || '(body)', message: issue.message }));
}

function safeJson(raw: string | undefined): unknown {
  if (raw === undefined) return {};
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    return {};
  }
}
