import type { Redis } from 'ioredis';
import { shardOf, type Keys } from '../keys.ts';
import { indexScriptKeys } from '../lifecycle/keys.ts';
import { IndexBatcher, indexArgs, type IndexUpdate } from './fleet-index.ts';
import { ACQUIRE, CANCEL, ENQUEUE, INDEX, RENEW, STEERS_TO_TURNS, WRITE } from './scripts.ts';
import { hasErrorCode, StaleLeaseError } from '../../errors.ts';
import { outboxKey, type OutboxHooks } from '../webhooks/outbox-keys.ts';

import {
  multiValues,
  parseEntry,
  parseSteers,
  type AcquireResult,
  type CancelRequest,
  type EnqueueLimits,
  type EnqueueResult,
  type InboxPrompt,
  type LoadedSession,
  type PendingSteer,
  type StoredMessage,
  type WriteBatch,
  type WriteResult,
} from './records.ts';

export type {
  AcquireResult,
  CancelRequest,
  EnqueueLimits,
  EnqueueResult,
  InboxPrompt,
  LoadedSession,
  PendingSteer,
  StoredMessage,
  WriteBatch,
  WriteResult,
} from './records.ts';
export { multiValues, parseEntry } from './records.ts';

/** Defined with every other error of sessiond in src/errors.ts. */
export { StaleLeaseError };

/** A fenced write landed on the master but fewer replicas than asked acknowledged it in time (WAIT). */
export class ReplicationError extends Error {
  override readonly name = 'ReplicationError';
  constructor(sessionId: string, acked: number, wanted: number) {
    super(`session ${sessionId}: the write reached ${acked} of ${wanted} replicas in time; it is sent again`);
  }
}

type ScriptFn = (...args: Array<string | number>) => Promise<unknown>;

/**
 * Redis access for sessions. Contract: every write made while driving a session
 * goes through `write()` with the lease token, atomically, in one round trip.
 */
export class SessionStore {
  readonly redis: Redis;
  readonly keys: Keys;
  /** The fleet-index updates of this store's writes, one script call per tick. */
  readonly #index: IndexBatcher;
  /** How long a session that finishes is kept (its own `retention` wins); 0: forever. */
  retentionMs: number;
  /** Fenced writes wait for this many replicas (WAIT) before they count as written; 0: no wait. */
  readonly waitReplicas: number;
  readonly waitTimeoutMs: number;
  /** Set where webhooks may be (the operator's, or sessions' own): events of a write go to the session's outbox (webhooks/outbox.ts). */
  webhooks: OutboxHooks | null = null;

  constructor(
    redis: Redis,
    keys: Keys,
    options: { retentionMs?: number; waitReplicas?: number; waitTimeoutMs?: number } = {},
  ) {
    this.redis = redis;
    this.keys = keys;
    this.retentionMs = options.retentionMs ?? 0;
    this.waitReplicas = options.waitReplicas ?? 0;
    this.waitTimeoutMs = options.waitTimeoutMs ?? 1000;
    this.#index = new IndexBatcher((shard, args) => this.#sendIndex(shard, args));
    const define = (name: string, numberOfKeys: number, lua: string): void => {
      if (!(name in redis)) redis.defineCommand(name, { numberOfKeys, lua });
    };
    define('sessiondEnqueue', 10, ENQUEUE);
    define('sessiondAcquire', 6, ACQUIRE);
    define('sessiondRenew', 1, RENEW);
    define('sessiondWrite', 14, WRITE);
    define('sessiondSteersToTurns', 6, STEERS_TO_TURNS);
    define('sessiondCancel', 4, CANCEL);
    define('sessiondIndex', indexScriptKeys(keys).keys.length, INDEX);
  }

  #script(name: string): ScriptFn {
    const fn = (this.redis as unknown as Record<string, ScriptFn>)[name];
    if (fn === undefined) throw new Error(`script ${name} not defined`);
    return fn.bind(this.redis);
  }

  key(sessionId: string, part: Parameters<Keys['session']>[1]): string {
    return this.keys.session(sessionId, part);
  }

  async enqueue(
    sessionId: string,
    create: Record<string, string>,
    prompt: InboxPrompt,
    policyJson: string | null,
    newJobId: string,
    limits: EnqueueLimits = {},
  ): Promise<EnqueueResult> {
    const k = (p: Parameters<Keys['session']>[1]) => this.key(sessionId, p);
    const promptJson = JSON.stringify(prompt);
    const r = (await this.#script('sessiondEnqueue')(
      k('meta'),
      k('inbox'),
      k('active'),
      k('snapshot'),
      k('seq'),
      k('cancel'),
      k('steers'),
      outboxKey(this.keys, sessionId, 'target'),
      outboxKey(this.keys, sessionId, 'outbox'),
      outboxKey(this.keys, sessionId, 'owed'),
      sessionId,
      String(prompt.enqueuedAt),
      JSON.stringify(create),
      promptJson,
      policyJson ?? '',
      newJobId,
      limits.mustExist === true ? '1' : '',
      limits.maxQueued ?? 0,
      limits.maxLog ?? 0,
      limits.retentionMs === undefined ? '' : limits.retentionMs,
      limits.priority === undefined ? '' : limits.priority,
      limits.maxLogBytes ?? 0,
      limits.whenBusy ?? '',
      limits.webhook?.url ?? '',
      limits.webhook?.secret ?? '',
    )) as Array<number | string>;
    const code = Number(r[0]);
    if (code === -1) return { ok: false, reason: 'unknown_session' };
    if (code === -2) return { ok: false, reason: 'deleting' };
    if (code === -3) return { ok: false, reason: 'queue_full', limit: Number(r[1]), count: Number(r[2]) };
    if (code === -4) return { ok: false, reason: 'log_full', limit: Number(r[1]), count: Number(r[2]) };
    if (code === -5) return { ok: false, reason: 'log_bytes_full', limit: Number(r[1]), count: Number(r[2]) };
    if (code === -6) return { ok: false, reason: 'busy', state: String(r[1]), waiting: Number(r[2]) };
    const jobId = String(r[2] ?? '');
    const priority = String(r[3] ?? '');
    return {
      ok: true,
      turn: code,
      created: Number(r[1]) === 1,
      jobId: jobId === '' ? null : jobId,
      priority: priority === '' ? 0 : Number(priority),
      shard: shardOf(r[4]),
      interrupted: r[5] === undefined || r[5] === '' ? null : Number(r[5]),
      activeJobId: String(r[6] ?? jobId),
      steered: Number(r[7]) === 1,
    };
  }

  async acquire(sessionId: string, workerId: string, ttlMs: number): Promise<AcquireResult> {
    const k = (p: Parameters<Keys['session']>[1]) => this.key(sessionId, p);
    const r = (await this.#script('sessiondAcquire')(
      k('lease'),
      k('fence'),
      k('meta'),
      k('snapshot'),
      k('inbox'),
      k('cancel'),
      workerId,
      ttlMs,
    )) as unknown[];
    if (r[0] === -1) return { ok: false, reason: 'unknown_session' };
    if (r[0] === 0) return { ok: false, reason: 'busy', retryInMs: Math.max(0, Number(r[1])), holder: String(r[2]) };
    const flat = (r[3] ?? []) as string[];
    const meta: Record<string, string> = {};
    for (let i = 0; i + 1 < flat.length; i += 2) meta[flat[i] as string] = flat[i + 1] as string;
    const cancel = typeof r[6] === 'string' ? (JSON.parse(r[6]) as CancelRequest) : null;
    const loaded: LoadedSession = {
      meta,
      snapshot: typeof r[4] === 'string' ? r[4] : null,
      inbox: ((r[5] ?? []) as string[]).map((raw) => JSON.parse(raw) as InboxPrompt),
      cancel,
    };
    return { ok: true, fence: Number(r[1]), token: String(r[2]), loaded };
  }

  async renew(sessionId: string, token: string, ttlMs: number): Promise<boolean> {
    return (await this.#script('sessiondRenew')(this.key(sessionId, 'lease'), token, ttlMs)) === 1;
  }

  /**
   * One atomic, fenced write (and, with `batch.release`, the lease given back in the same call).
   * Throws StaleLeaseError (having written nothing) when the token is not the lease's.
   */
  async write(sessionId: string, token: string, batch: WriteBatch): Promise<WriteResult> {
    const k = (p: Parameters<Keys['session']>[1]) => this.key(sessionId, p);
    const history = batch.history ?? [];
    const agent = batch.agentState ?? [];
    const messages = batch.messages ?? [];
    const counters = batch.counters ?? [];
    // Webhook events go only where the deployment has webhooks, or (policy.webhooks) where the session has its own;
    // the marker (webhooks/outbox.ts) first, so a crash after the write still leaves the session where the deliverers
    // look.
    let outbox = this.webhooks === null ? [] : (batch.outbox ?? []);
    if (
      outbox.length > 0 &&
      this.webhooks?.operator !== true &&
      (await this.redis.exists(outboxKey(this.keys, sessionId, 'target'))) === 0
    )
      outbox = [];
    if (outbox.length > 0) await this.webhooks?.mark(sessionId);
    const args: Array<string | number> = [
      k('lease'),
      k('snapshot'),
      k('log'),
      k('seq'),
      k('history'),
      k('inbox'),
      k('meta'),
      k('cancel'),
      k('agent'),
      k('active'),
      k('counters'),
      outboxKey(this.keys, sessionId, 'outbox'),
      outboxKey(this.keys, sessionId, 'due'),
      k('steers'),
      token,
      batch.snapshot ?? '',
      batch.inboxTrim ?? 0,
      batch.clearCancel === true ? '1' : '0',
      batch.state ?? '',
      Date.now(),
      history.length,
      agent.length,
      messages.length,
      batch.writeId === undefined ? '' : batch.writeId,
      batch.release ?? '',
      counters.length,
      ...history,
      ...agent.flat(),
      ...messages.flatMap((m) => [m.turn, m.attempt, m.type, m.content]),
      ...counters.flat(),
      batch.usage === undefined || batch.usage.length === 0 ? '' : JSON.stringify(batch.usage),
      batch.trace ?? '',
      outbox.length,
      this.webhooks?.maxPerSession ?? 0,
      ...outbox.flatMap((e) => [e.id, e.body]),
      ...(batch.steersDelivered ?? []),
    ];
    const r = (
      this.waitReplicas > 0 ? await this.#writeAndWait(sessionId, args) : await this.#script('sessiondWrite')(...args)
    ) as Array<number | string>;
    if (r[0] === -1) throw new StaleLeaseError(sessionId);
    if (outbox.length > 0) this.webhooks?.wrote(sessionId);
    const released = r[2] === 1 ? 1 : r[2] === 0 ? 0 : null;
    const at = Date.now();
    const shard = shardOf(r[4]);
    if (released === 1 && batch.release === 'idle') {
      // The session's activation ended (the reconciler need not watch it any more) and it is finished: its retention starts.
      const own = r[3] === undefined || r[3] === '' ? null : Number(r[3]);
      const retention = own ?? this.retentionMs;
      this.#index.add(sessionId, shard, {
        activation: 'end',
        expireAt: retention > 0 ? at + retention : 'remove',
        ...(batch.state ? { state: batch.state } : {}),
        at,
      });
    } else if (batch.state !== undefined && batch.state !== '') {
      this.#index.add(sessionId, shard, { state: batch.state, at });
    } else if ((batch.inboxTrim ?? 0) > 0) {
      this.#index.add(sessionId, shard, { touch: true, at });
    }
    return { lastSeq: Number(r[1]), released };
  }

  /**
   * WRITE then WAIT on the same connection (a pipeline goes to one node: the session's master), so
   * WAIT covers this write. Fewer acknowledgements than asked: ReplicationError, and the writer sends
   * the batch again (its write id makes the second call write nothing, and wait again).
   */
  async #writeAndWait(sessionId: string, args: Array<string | number>): Promise<unknown> {
    const pipeline = this.redis.pipeline() as unknown as Record<string, (...a: Array<string | number>) => unknown> & {
      exec(): Promise<Array<[Error | null, unknown]> | null>;
    };
    pipeline.sessiondWrite?.(...args);
    pipeline.wait?.(this.waitReplicas, this.waitTimeoutMs);
    const replies = (await pipeline.exec()) ?? [];
    const [writeError, written] = replies[0] ?? [new Error('no reply'), null];
    if (writeError !== null) throw writeError;
    const [waitError, acked] = replies[1] ?? [new Error('no reply'), null];
    if (waitError !== null) throw waitError;
    const r = written as Array<number | string>;
    if (r[0] !== -1 && Number(acked) < this.waitReplicas)
      throw new ReplicationError(sessionId, Number(acked), this.waitReplicas);
    return r;
  }

  /** Sends the fleet-index updates queued by `write` (they go within a tick anyway). */
  flushIndex(): Promise<void> {
    return this.#index.flush();
  }

  /** Gives the lease back without writing anything: 1 released, 0 prompts or a cancel are waiting (still held; idle mode only), -1 stale. */
  async release(sessionId: string, token: string, mode: 'idle' | 'keep'): Promise<1 | 0 | -1> {
    try {
      return (await this.write(sessionId, token, { release: mode })).released ?? 1;
    } catch (error) {
      if (hasErrorCode(error, 'stale_lease')) return -1;
      throw error;
    }
  }

  /**
   * Updates the fleet-wide indexes for one session now (see INDEX in scripts.ts), in its index shard:
   * `shard` when the caller knows it (an enqueue's reply says it), else read from the session's meta.
   */
  async index(sessionId: string, update: Omit<IndexUpdate, 'at'> & { at?: number }, shard?: number): Promise<void> {
    const home = shard ?? (await this.shard(sessionId));
    await this.#sendIndex(home, indexArgs(sessionId, { ...update, at: update.at ?? Date.now() }));
  }

  /** The session's fleet-index shard, fixed when it was created (its meta's `shard`; none: 0, as every session before shards). */
  async shard(sessionId: string): Promise<number> {
    return shardOf(await this.redis.hget(this.key(sessionId, 'meta'), 'shard'));
  }

  #sendIndex(shard: number, args: string[]): Promise<unknown> {
    const index = indexScriptKeys(this.keys, shard);
    return this.#script('sessiondIndex')(...index.keys, index.states, ...args);
  }

  async requestCancel(sessionId: string, reason: string, newJobId: string) {
    const r = (await this.#script('sessiondCancel')(
      this.key(sessionId, 'meta'),
      this.key(sessionId, 'cancel'),
      this.key(sessionId, 'lease'),
      this.key(sessionId, 'active'),
      JSON.stringify({ reason, at: Date.now() }),
      newJobId,
    )) as [number, string];
    return { code: r[0], jobId: r[1] };
  }

  async cancelRequest(sessionId: string): Promise<CancelRequest | null> {
    const raw = await this.redis.get(this.key(sessionId, 'cancel'));
    return raw === null ? null : (JSON.parse(raw) as CancelRequest);
  }

  async inbox(sessionId: string): Promise<InboxPrompt[]> {
    return (await this.redis.lrange(this.key(sessionId, 'inbox'), 0, -1)).map((raw) => JSON.parse(raw) as InboxPrompt);
  }

  async meta(sessionId: string): Promise<Record<string, string> | null> {
    const meta = await this.redis.hgetall(this.key(sessionId, 'meta'));
    return Object.keys(meta).length === 0 ? null : meta;
  }

  async snapshot(sessionId: string): Promise<string | null> {
    return this.redis.get(this.key(sessionId, 'snapshot'));
  }

  async history(sessionId: string): Promise<unknown[]> {
    return (await this.redis.lrange(this.key(sessionId, 'history'), 0, -1)).map((raw) => JSON.parse(raw) as unknown);
  }

  async agentState(sessionId: string, field: string): Promise<string | null> {
    return this.redis.hget(this.key(sessionId, 'agent'), field);
  }

  async activeJobId(sessionId: string): Promise<string | null> {
    return this.redis.get(this.key(sessionId, 'active'));
  }

  async leaseHolder(sessionId: string): Promise<string | null> {
    return this.redis.get(this.key(sessionId, 'lease'));
  }

  /** Everything an operator's view needs, read in one MULTI (one session's keys share a slot): a consistent picture. */
  async view(sessionId: string) {
    const k = (p: Parameters<Keys['session']>[1]) => this.key(sessionId, p);
    const replies = await this.redis
      .multi()
      .hgetall(k('meta'))
      .get(k('snapshot'))
      .lrange(k('inbox'), 0, -1)
      .lrange(k('history'), 0, -1)
      .get(k('seq'))
      .get(k('lease'))
      .get(k('cancel'))
      .lrange(k('steers'), 0, -1)
      .exec();
    const value = multiValues(replies, sessionId);
    const meta = value(0) as Record<string, string>;
    if (Object.keys(meta).length === 0) return null;
    const cancel = value(6) as string | null;
    return {
      meta,
      snapshot: value(1) as string | null,
      inbox: (value(2) as string[]).map((raw) => JSON.parse(raw) as InboxPrompt),
      history: (value(3) as string[]).map((raw) => JSON.parse(raw) as unknown),
      lastSeq: Number((value(4) as string | null) ?? 0),
      heldBy: value(5) as string | null,
      cancel: cancel === null ? null : (JSON.parse(cancel) as CancelRequest),
      steers: parseSteers(value(7) as string[]),
    };
  }

  /** The session's pending steers (whenBusy "steer"), oldest first. */
  async steers(sessionId: string): Promise<PendingSteer[]> {
    return parseSteers(await this.redis.lrange(this.key(sessionId, 'steers'), 0, -1));
  }

  /**
   * The turn is over: the steers still pending become the next turns (STEERS_TO_TURNS), fenced by the holder's
   * token; how many did. StaleLeaseError (nothing moved) when the lease is not the token's.
   */
  async steersToTurns(sessionId: string, token: string): Promise<number> {
    const k = (p: Parameters<Keys['session']>[1]) => this.key(sessionId, p);
    const r = Number(
      await this.#script('sessiondSteersToTurns')(
        k('lease'),
        k('steers'),
        k('inbox'),
        k('meta'),
        k('log'),
        k('seq'),
        token,
        Date.now(),
      ),
    );
    if (r === -1) throw new StaleLeaseError(sessionId);
    return r;
  }

  /** Messages with seq ≥ fromSeq, in order. */
  async readMessages(sessionId: string, fromSeq = 1, count = 1000): Promise<StoredMessage[]> {
    const entries = await this.redis.xrange(
      this.key(sessionId, 'log'),
      `${Math.max(1, fromSeq)}-0`,
      '+',
      'COUNT',
      count,
    );
    return entries.map(([, fields]) => parseEntry(fields));
  }

  /**
   * The messages of one attempt, in order, read from the log's end back (the attempt must be the log's last,
   * as an interrupted one is: nothing ran after it).
   */
  async readLastAttempt(sessionId: string, turn: number, attempt: number): Promise<StoredMessage[]> {
    const key = this.key(sessionId, 'log');
    const found: StoredMessage[] = [];
    let end = '+';
    for (;;) {
      const entries = await this.redis.xrevrange(key, end, '-', 'COUNT', 256);
      for (const [id, fields] of entries) {
        const message = parseEntry(fields);
        if (message.turn !== turn || message.attempt !== attempt) return found.reverse();
        found.push(message);
        end = `(${id}`;
      }
      if (entries.length < 256) return found.reverse();
    }
  }

  /** Bytes of message content the session's log holds (the meta's `logBytes`, counted by every write). */
  async logBytes(sessionId: string): Promise<number> {
    return Number((await this.redis.hget(this.key(sessionId, 'meta'), 'logBytes')) ?? 0);
  }

  async lastSeq(sessionId: string): Promise<number> {
    return Number((await this.redis.get(this.key(sessionId, 'seq'))) ?? 0);
  }
}
