import { cancelStage } from '../process/cancel-stages.ts';
import { StaleLeaseError } from '../errors.ts';
import { contentJson } from './store/log-room.ts';
import { eventId } from './webhooks/outbox-keys.ts';
import type { SessionStore, WriteBatch } from './store/session-store.ts';
import type { UsageRecord } from './usage/usage.ts';

type Batch = Required<Omit<WriteBatch, 'writeId' | 'release'>>;

/** A serialised session snapshot and its state's name. */
export interface SnapshotValue {
  json: string;
  state: string;
}

/** Messages are written at most this long after they were emitted… */
export const FLUSH_DELAY_MS = 5;
/** …or as soon as this many are waiting. */
export const FLUSH_AT_MESSAGES = 256;

/**
 * Batches everything the driving worker writes for one session — messages,
 * snapshot, transition history, inbox consumption, agent state — into single
 * fenced writes, one at a time and in order. Contract: a message is never
 * dropped by the writer; once the lease is lost every call rejects with
 * StaleLeaseError and nothing more is written.
 */
export class SessionWriter {
  readonly #store: SessionStore;
  readonly #sessionId: string;
  readonly #token: string;
  #pending: Batch = emptyBatch();
  #chain: Promise<void> = Promise.resolve();
  #timer: NodeJS.Timeout | undefined;
  #failure: Error | null = null;
  /** The number of this writer's next batch (see WRITE: a batch sent again after it landed writes nothing). */
  #nextWriteId = 1;
  /** A batch whose call failed (it may have landed or not): sent again, alone and with its number, before anything else. */
  #unsent: { id: number; batch: Batch; landed: Array<() => void> } | null = null;
  /** Called once the pending batch is in Redis (see landed()). */
  #landed: Array<() => void> = [];
  /** Serialises the session's latest snapshot, when it changed since the last write. */
  #take: (() => SnapshotValue) | null = null;

  constructor(store: SessionStore, sessionId: string, token: string) {
    this.#store = store;
    this.#sessionId = sessionId;
    this.#token = token;
  }

  get failure(): Error | null {
    return this.#failure;
  }

  /** The holder self-fenced (its lease may lapse before it could renew it): nothing more is written, as if stale. */
  fence(): void {
    this.#failure ??= new StaleLeaseError(this.#sessionId);
  }

  message(turn: number, attempt: number, type: string, content: unknown): Promise<void> | undefined {
    this.#pending.messages.push({ turn, attempt, type, content: contentJson(content) });
    if (type === 'approval.requested') this.event(type, turn, approvalEvent(attempt, content));
    if (this.#pending.messages.length >= FLUSH_AT_MESSAGES) return this.flush();
    this.soon();
    return undefined;
  }

  /**
   * The session's snapshot changed: `take()` serialises its latest version, called once per write
   * (not per change: a turn changes it several times between two writes). The holder calls
   * `materialize()` before it stops its actor.
   */
  snapshot(take: () => SnapshotValue): void {
    this.#take = take;
  }

  /** Serialises the pending snapshot now (its actor is about to stop). */
  materialize(): void {
    const take = this.#take;
    this.#take = null;
    if (take === null) return;
    const { json, state } = take();
    this.#pending.snapshot = json;
    this.#pending.state = state;
  }

  /** An attempt's token usage: call it with its terminal message (same batch, so counted with it, once). */
  usage(record: UsageRecord): void {
    this.#pending.usage.push(record);
  }

  /** The current turn's trace context (JSON), stored in the session's meta with the next write. */
  trace(json: string): void {
    this.#pending.trace = json;
  }

  history(entry: unknown): void {
    this.#pending.history.push(JSON.stringify(entry));
  }

  inboxConsumed(count: number): void {
    this.#pending.inboxTrim += count;
  }

  cancelHandled(): void {
    this.#pending.clearCancel = true;
  }

  /**
   * A pending steer was delivered: the message that says so and the steer's removal (its stored JSON) go in the
   * same batch, so in the same fenced call (exactly once: a stale holder writes neither).
   */
  steerDelivered(turn: number, attempt: number, content: unknown, raw: string): void {
    this.#pending.messages.push({ turn, attempt, type: 'prompt.steered', content: contentJson(content) });
    this.#pending.steersDelivered.push(raw);
    this.soon();
  }

  agentState(field: string, value: string): void {
    this.#pending.agentState.push([field, value]);
  }

  /**
   * A webhook event (webhooks/outbox.ts), recorded in the session's outbox by the next write, with
   * the transition it reports. `seq: true`: its body gets the seq of the session's last stored message.
   */
  event(type: string, turn: number, data: Record<string, unknown> = {}, seq = false): void {
    const id = eventId();
    const body = { type, id, sessionId: this.#sessionId, turn, at: new Date().toISOString(), ...data };
    // WRITE puts the seq in place of this -1 (see webhooks/outbox-script.ts).
    this.#pending.outbox.push({ id, body: JSON.stringify(seq ? { seq: -1, ...body } : body) });
  }

  /** Adds to one of the session's counters with the next write (in the same call as the snapshot that records why). */
  count(field: string, by = 1): void {
    this.#pending.counters.push([field, by]);
  }

  /**
   * Calls `then` once everything pending now is in Redis, with the write that takes it as it would
   * go anyway (no write of its own: a quiescent state goes with the release). Never, if that write
   * finds the lease lost (what it held is then not this holder's to tell of).
   */
  landed(then: () => void): void {
    if (isEmpty(this.#pending) && this.#take === null && this.#unsent === null) callAll([then]);
    else this.#landed.push(then);
  }

  /** Writes everything pending; resolves once it is in Redis. */
  flush(): Promise<void> {
    return this.#enqueue(async () => {
      await this.#writeOnce();
    });
  }

  /**
   * Writes everything pending and gives the lease back in the same call (see WRITE in
   * store/scripts.ts): 1 released, 0 not (idle mode: prompts or a cancel are waiting; still held).
   */
  release(mode: 'idle' | 'keep'): Promise<1 | 0> {
    return this.#enqueue(async () => (await this.#writeOnce(mode)) ?? 1);
  }

  #enqueue<T>(write: () => Promise<T>): Promise<T> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const run = this.#chain.then(write);
    this.#chain = run.then(
      () => undefined,
      // The caller of each write gets its error; the chain only keeps the order.
      () => undefined,
    );
    return run;
  }

  /** Writes what is pending within FLUSH_DELAY_MS (batched with what comes meanwhile). */
  soon(): void {
    if (this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      // A failed write is kept in `failure` (and sent again), which the holder reads.
      this.flush().catch(() => undefined);
    }, FLUSH_DELAY_MS);
  }

  /** Writes the pending batch (with a release: even an empty one); the release's outcome, null without one. */
  async #writeOnce(release?: 'idle' | 'keep'): Promise<1 | 0 | null> {
    if (this.#failure !== null) throw this.#failure;
    const unsent = this.#unsent;
    if (unsent !== null) {
      this.#unsent = null;
      await this.#send(unsent.id, unsent.batch, undefined, unsent.landed);
    }
    this.materialize();
    const batch = this.#pending;
    const landed = this.#landed;
    this.#landed = [];
    if (isEmpty(batch) && release === undefined) {
      callAll(landed);
      return null;
    }
    this.#pending = emptyBatch();
    const id = this.#nextWriteId;
    this.#nextWriteId += 1;
    return this.#send(id, batch, release, landed);
  }

  /** One fenced write; a batch whose call failed for another reason than a stale lease is kept to be sent again. */
  async #send(
    id: number,
    batch: Batch,
    release?: 'idle' | 'keep',
    landed: Array<() => void> = [],
  ): Promise<1 | 0 | null> {
    try {
      const result = await this.#store.write(this.#sessionId, this.#token, {
        ...(release === undefined ? {} : { release }),
        writeId: id,
        ...(batch.snapshot === '' ? {} : { snapshot: batch.snapshot, state: batch.state }),
        inboxTrim: batch.inboxTrim,
        clearCancel: batch.clearCancel,
        history: batch.history,
        agentState: batch.agentState,
        messages: batch.messages,
        counters: batch.counters,
        usage: batch.usage,
        ...(batch.trace === '' ? {} : { trace: batch.trace }),
        ...(batch.outbox.length === 0 ? {} : { outbox: batch.outbox }),
        ...(batch.steersDelivered.length === 0 ? {} : { steersDelivered: batch.steersDelivered }),
      });
      if (batch.state === 'cancelled') cancelStage(this.#sessionId, 'written');
      callAll(landed);
      return result.released;
    } catch (error) {
      if ((error as Error).name === 'StaleLeaseError') {
        this.#failure = error as Error;
        throw error;
      }
      // Redis unreachable for a moment: the call may have landed or not. The batch goes again, with
      // the same number (written once either way), before anything written after it.
      this.#unsent = { id, batch, landed };
      throw error;
    }
  }
}

/** What a webhook tells of an approval request: who asks for what (not the tool's arguments, which may be large). */
function approvalEvent(attempt: number, content: unknown): Record<string, unknown> {
  const c = (content ?? {}) as Record<string, unknown>;
  return { attempt, requestId: c.requestId, toolCallId: c.toolCallId, tool: c.tool, deadlineAt: c.deadlineAt };
}

function callAll(calls: ReadonlyArray<() => void>): void {
  for (const call of calls) {
    try {
      call();
    } catch {
      // A caller's callback never breaks the writer.
    }
  }
}

function emptyBatch(): Batch {
  return {
    snapshot: '',
    state: '',
    inboxTrim: 0,
    clearCancel: false,
    history: [],
    agentState: [],
    messages: [],
    counters: [],
    usage: [],
    trace: '',
    outbox: [],
    steersDelivered: [],
  };
}

function isEmpty(b: Batch): boolean {
  return (
    b.snapshot === '' &&
    b.inboxTrim === 0 &&
    !b.clearCancel &&
    b.history.length === 0 &&
    b.agentState.length === 0 &&
    b.messages.length === 0 &&
    b.counters.length === 0 &&
    b.usage.length === 0 &&
    b.trace === '' &&
    b.outbox.length === 0 &&
    b.steersDelivered.length === 0
  );
}
