import { randomBytes, randomUUID } from 'node:crypto';
import { newJobId } from '../queue.ts';
import { parseDuration } from '../../config/duration.ts';
import { ConflictError, InputError, NotFoundError, QuotaError, SessionBusyError } from '../../errors.ts';
import { type CallerParts } from './parts.ts';
import { DEFAULT_RETRY_POLICY, mergeRetryPolicy } from '../../retry/policy.ts';
import { parkLimitIssues, turnLimitIssue } from '../deployment-policy.ts';
import { admitTurn, DEFAULT_AGENT, TurnOptionsSchema } from '../enqueue-checks.ts';
import { EnqueueRequestSchema, zodIssues, type EnqueueRequestOutput } from '../enqueue-request.ts';
import { withOwnerSlot, type SessionOwner } from '../limits/owner-sessions.ts';
import { whenBusyField } from '../counters.ts';
import { WHEN_BUSY, webhookIssue, type DeploymentPolicy, type WhenBusy } from '../../policy/index.ts';
import { lifecycleKeys } from '../lifecycle/keys.ts';

// Enqueue: a caller's prompt checked (its fields, the deployment policy, the quotas), stored, and its activation added.

/**
 * A stored prompt: `promptId` names it (the log's `prompt.steered`, the queue's listing). `steered`: it was sent
 * with whenBusy "steer" while a turn ran, so it went into that turn (`turn`) as a pending steer, not a new turn.
 */
export interface Enqueued {
  sessionId: string;
  turn: number;
  created: boolean;
  promptId: string;
  steered: boolean;
  /** With `webhook`: the secret its deliveries are signed with (`whsec_…`), generated for it and returned only here. */
  webhookSecret?: string;
}

/** How a prompt is added: `mustExist` refuses an unknown session; `owner` (a token and its maxSessions) holds a slot of its session cap for a new session. */
export interface EnqueueHow {
  mustExist?: boolean;
  owner?: SessionOwner;
  /** The stored prompt's id (default: a random UUID): a schedule's firing names its schedule and tick (schedules/fire.ts). */
  promptId?: string;
}

/**
 * Adds a prompt (creating the session unless `mustExist`). Refused with nothing written: InputError
 * (a bad field), NotFoundError (mustExist, unknown), ConflictError (being deleted), QuotaError (a limit).
 */
export async function enqueue(parts: CallerParts, input: unknown, how: EnqueueHow = {}): Promise<Enqueued> {
  const { request, policyJson, whenBusy, retentionMs, options } = await checkEnqueue(parts, input);
  const sessionId = request.sessionId ?? randomUUID();
  const create: Record<string, string> = {
    agent: typeof options.agent === 'string' ? options.agent : DEFAULT_AGENT,
    options: JSON.stringify(options),
  };
  if (request.tenant !== undefined) create.tenant = request.tenant;
  // A new session's fleet-index shard is its partition's now, kept for good (see keys.ts); the count is recorded first, so readers merge that shard.
  const shard = parts.queue.indexShardOf(sessionId);
  if (shard > 0) {
    create.shard = String(shard);
    await parts.queue.knownPartitions();
  }
  const jobId = newJobId(sessionId);
  const prompt = { id: how.promptId ?? randomUUID(), text: request.prompt, options, enqueuedAt: Date.now() };
  // A secret of its own per endpoint, generated (not derived): no worker needs an operator secret to sign with it.
  const webhook =
    request.webhook === undefined
      ? undefined
      : { url: request.webhook, secret: `whsec_${randomBytes(24).toString('base64')}` };
  // Issue 25 (auth lane): a new session takes a slot of its owner token's maxSessions (limits/owner-sessions.ts).
  const owner = how.mustExist === true ? undefined : how.owner;
  const result = await withOwnerSlot(parts.redis, parts.keys, owner, sessionId, () =>
    parts.store.enqueue(sessionId, create, prompt, policyJson, jobId, {
      ...(how.mustExist === true ? { mustExist: true } : {}),
      maxQueued: parts.limits.maxQueuedPrompts,
      maxLog: parts.limits.maxLogMessages,
      maxLogBytes: parts.limits.maxLogBytes,
      ...(retentionMs === undefined ? {} : { retentionMs }),
      ...(request.priority === undefined ? {} : { priority: request.priority }),
      ...(whenBusy === 'enqueue' ? {} : { whenBusy }),
      ...(webhook === undefined ? {} : { webhook }),
    }),
  );
  if (!result.ok) {
    if (result.reason === 'unknown_session') throw new NotFoundError(`unknown session "${sessionId}"`);
    if (result.reason === 'busy') throw new SessionBusyError(sessionId, result.state, result.waiting);
    if (result.reason === 'deleting')
      throw new ConflictError(`session "${sessionId}" is being deleted: the prompt was not stored`);
    if (result.reason === 'queue_full')
      throw new QuotaError(
        'maxQueuedPrompts',
        result.limit,
        `session "${sessionId}" already has ${result.count} prompts waiting (maxQueuedPrompts ${result.limit}): the prompt was not stored`,
      );
    if (result.reason === 'log_bytes_full')
      throw new QuotaError(
        'maxLogBytes',
        result.limit,
        `session "${sessionId}" has ${result.count} bytes of messages stored, its message log is full (maxLogBytes ${result.limit}): the prompt was not stored`,
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
    parts.store.index(
      sessionId,
      {
        ...(result.created ? { created: true, state: 'queued' } : { touch: true }),
        expireAt: 'remove',
        ...(result.jobId !== null ? { activation: 'add' as const } : {}),
      },
      result.shard,
    ),
  );
  if (result.jobId !== null) writes.push(parts.queue.addActivation(sessionId, result.jobId, result.priority));
  await Promise.all(writes);
  // A new activation means nobody holds the session: there is no one to tell.
  if (result.jobId === null) await parts.bus.publish({ sessionId, kind: result.steered ? 'steer' : 'prompt' });
  if (result.interrupted !== null) await deliverInterrupt(parts, sessionId, result);
  if (whenBusy !== 'enqueue')
    await parts.redis
      .hincrby(
        lifecycleKeys(parts.keys).counters,
        whenBusyField(whenBusy, result.steered ? 'steered' : result.interrupted === null ? 'queued' : 'interrupted'),
        1,
      )
      // Silent: a metric only; the prompt is stored and delivered whether or not it is counted.
      .catch(() => undefined);
  return {
    sessionId,
    turn: result.turn,
    created: result.created,
    promptId: prompt.id,
    steered: result.steered,
    ...(webhook === undefined ? {} : { webhookSecret: webhook.secret }),
  };
}

/** What checkEnqueue gives: the request as parsed, with what enqueue stores of it. */
export interface CheckedEnqueue {
  request: EnqueueRequestOutput;
  policyJson: string | null;
  whenBusy: string;
  retentionMs: number | undefined;
  options: Record<string, unknown>;
}

/**
 * Every check of an enqueue that needs no session (its fields, the retry policy, whenBusy, the retention, the
 * deployment policy's admission of its options and prompt), writing nothing: an InputError naming each bad field.
 * A schedule is checked with it when it is added, and each of its firings is an enqueue that checks it again.
 */
export async function checkEnqueue(parts: CallerParts, input: unknown): Promise<CheckedEnqueue> {
  // The policy first: resolving it registers a library caller's own agents.
  const policy = await parts.deploymentPolicy();
  const parsed = EnqueueRequestSchema.safeParse(input);
  const rawOptions = (input as { options?: unknown } | null)?.options;
  const optionIssues =
    rawOptions === null || typeof rawOptions !== 'object' || Array.isArray(rawOptions)
      ? []
      : zodIssues(TurnOptionsSchema.safeParse(rawOptions).error, ['options']);
  if (!parsed.success || optionIssues.length > 0)
    throw new InputError([...(parsed.success ? [] : zodIssues(parsed.error)), ...optionIssues]);
  const request = parsed.data;
  let policyJson: string | null = null;
  if (request.retryPolicy !== undefined) {
    const policy = mergeRetryPolicy(DEFAULT_RETRY_POLICY, request.retryPolicy);
    if (!policy.ok)
      throw new InputError(policy.errors.map((e) => ({ field: `retryPolicy.${e.field}`, message: e.message })));
    const deployment = await parts.deploymentPolicy();
    const overLimit = turnLimitIssue(request.retryPolicy, deployment);
    const overPark = parkLimitIssues(request.retryPolicy, deployment);
    if (overLimit !== null || overPark.length > 0)
      throw new InputError([...(overLimit === null ? [] : [overLimit]), ...overPark]);
    policyJson = JSON.stringify(policy.policy);
  }
  const whenBusy = request.whenBusy ?? 'enqueue';
  // The deployment says which strategies callers may use (policy.whenBusy); it wins over the caller.
  if (policy.whenBusy !== undefined && !policy.whenBusy.includes(whenBusy))
    throw new InputError([
      {
        field: 'whenBusy',
        message: `"${whenBusy}" is not allowed by this deployment (policy.whenBusy: ${policy.whenBusy.join(', ')})`,
      },
    ]);
  const retentionMs = request.retention === undefined ? undefined : retention(parts, request.retention);
  // The deployment lists the hosts callers may send webhooks to (deny by default); it wins over the caller.
  const hook = request.webhook === undefined ? null : webhookIssue(policy, request.webhook);
  if (hook !== null) throw new InputError([hook]);
  const options = request.options ?? {};
  if (whenBusy === 'rollback') await rollbackPossible(parts, request.sessionId, options);
  // The deployment's policy before anything is written; the worker checks the stored request again.
  const admitted = await admitTurn(policy, options, request.prompt);
  if (!admitted.ok) throw new InputError(admitted.issues);
  return { request, policyJson, whenBusy, retentionMs, options };
}

/** The strategies a caller of this deployment can use: those its policy allows, in WHEN_BUSY's order. */
export function whenBusyOffered(policy: Pick<DeploymentPolicy, 'whenBusy'>): WhenBusy[] {
  return WHEN_BUSY.filter((s) => policy.whenBusy === undefined || policy.whenBusy.includes(s));
}

/**
 * A rollback takes the interrupted turn back in the session's workspace: a session whose turns run in a caller-named
 * cwd (this prompt's options or the session's) has none, and is refused naming the field before anything is written.
 * Whether the worker that runs it has workspaces is not known here: there the log says the turn was not taken back.
 */
async function rollbackPossible(
  parts: CallerParts,
  sessionId: string | undefined,
  options: Readonly<Record<string, unknown>>,
): Promise<void> {
  const stored = sessionId === undefined ? null : await parts.redis.hget(parts.store.key(sessionId, 'meta'), 'options');
  let sessionCwd = false;
  try {
    sessionCwd = stored !== null && (JSON.parse(stored) as Record<string, unknown> | null)?.cwd !== undefined;
  } catch {
    // Stored options that do not parse name no cwd (the worker checks them again before the turn runs).
  }
  if (options.cwd !== undefined || sessionCwd)
    throw new InputError([
      {
        field: 'whenBusy',
        message:
          '"rollback" needs a workspace session: this session runs in a caller-named cwd (options.cwd), whose files cannot be taken back (use "interrupt")',
      },
    ]);
}

/**
 * The cancel an interrupting prompt stored (in the same script as the prompt) goes where a cancel goes: to the
 * holder by the bus, or, when the session's activation waits delayed (a long backoff, a quota wall), that
 * activation run now, so the interrupted turn does not wait for its retry (as caller/turns.ts `cancel` does).
 */
async function deliverInterrupt(
  parts: CallerParts,
  sessionId: string,
  result: { jobId: string | null; activeJobId: string },
): Promise<void> {
  await parts.bus.publish({ sessionId, kind: 'cancel' });
  if (result.jobId !== null) return;
  const job = await parts.queue.getJob(result.activeJobId);
  // Silent: not delayed any more (it started meanwhile), its holder reads the cancel request.
  if (job !== undefined && (await job.isDelayed())) await job.promote().catch(() => undefined);
}

/** A caller's retention for a session, in ms (0: forever), within the deployment's maximum. */
function retention(parts: CallerParts, value: string | number): number {
  const parsed = typeof value === 'number' ? { ok: true as const, ms: value } : parseDuration(value);
  if (!parsed.ok) throw new InputError([{ field: 'retention', message: parsed.message }]);
  const max = parts.limits.maxRetentionMs;
  if (max > 0 && (parsed.ms === 0 || parsed.ms > max))
    throw new InputError([
      {
        field: 'retention',
        message: `must be at most ${max} ms (the deployment's maximum retention)${parsed.ms === 0 ? '; 0 (forever) is not allowed' : ''}`,
      },
    ]);
  return parsed.ms;
}
