import type { Steer, SteeringChannel } from '../../agents/shared/steering.ts';
import { steerLatencyField } from '../counters.ts';
import type { SessionWriter } from '../session-writer.ts';
import type { PendingSteer, SessionStore } from '../store/session-store.ts';
import type { WarnLog } from './config.ts';

export interface AttemptSteeringInit {
  store: SessionStore;
  writer: SessionWriter;
  sessionId: string;
  turn: number;
  attempt: number;
  /** Subscribes to "look at the pending steers again" (a steer's bus event, the holder's poll); returns the unsubscribe. */
  onSteer: (listener: () => void) => () => void;
  warn: WarnLog;
}

/** How a steer reached the running turn (the log's `prompt.steered.via`). */
export type SteeredVia = 'native' | 'restart';

/**
 * The pending steers of the session as one attempt sees them (issue 29). The steers themselves are the
 * session's, in Redis (`steers`, written by ENQUEUE): this keeps a copy, read again whenever a steer is
 * accepted (the bus) or the holder polls, so that the attempt's runner can look at it at every tool boundary
 * without a read. A steer is delivered once: `deliver` puts the `prompt.steered` message and the steer's
 * removal in the same fenced write (session-writer.ts), and this attempt never offers it again (the fallback's
 * runner calls it with the write that records the agent's state holding it: attempt-runner.ts). One it took
 * and did not deliver (the attempt ended first) stays pending in Redis: the next attempt, or the next turn
 * (STEERS_TO_TURNS), has it.
 */
export class AttemptSteering {
  readonly #init: AttemptSteeringInit;
  /** The pending steers last read, oldest first, without those this attempt took or delivered. */
  #pending: PendingSteer[] = [];
  /** Ids this attempt took (to deliver) or delivered: never offered again by it. */
  readonly #taken = new Set<string>();
  #reading: Promise<void> | null = null;
  #again = false;
  #closed = false;
  #waiters: Array<() => void> = [];
  #unsubscribe: () => void = () => undefined;

  constructor(init: AttemptSteeringInit) {
    this.#init = init;
  }

  /** Reads the pending steers, then keeps reading them at each bus event or poll until `close`. */
  async start(): Promise<void> {
    this.#unsubscribe = this.#init.onSteer(() => void this.refresh());
    await this.refresh();
  }

  /** Stops reading; the native channel's `pending()` ends. */
  close(): void {
    this.#closed = true;
    this.#unsubscribe();
    this.#wake();
  }

  /** Reads the pending steers again (one read at a time: a request during one starts another after it). */
  refresh(): Promise<void> {
    if (this.#reading !== null) {
      this.#again = true;
      return this.#reading;
    }
    const read = async (): Promise<void> => {
      do {
        this.#again = false;
        try {
          const steers = await this.#init.store.steers(this.#init.sessionId);
          this.#pending = steers.filter((s) => !this.#taken.has(s.prompt.id));
        } catch (error) {
          // Redis unreachable for a moment: the steers stay pending there; the next poll reads them.
          this.#init.warn('the pending steers were not read (the next poll reads them)', error);
        }
      } while (this.#again && !this.#closed);
    };
    this.#reading = read().finally(() => {
      this.#reading = null;
      this.#wake();
    });
    return this.#reading;
  }

  /** A steer is pending that this attempt has not taken. */
  get hasPending(): boolean {
    return this.#pending.length > 0;
  }

  /** Takes every pending steer (oldest first): the caller delivers them (or leaves them pending in Redis). */
  takeAll(): PendingSteer[] {
    const taken = this.#pending;
    this.#pending = [];
    for (const steer of taken) this.#taken.add(steer.prompt.id);
    return taken;
  }

  /** The steer reached the agent: `prompt.steered` and its removal go in one fenced write; its latency is counted. */
  deliver(steer: PendingSteer, via: SteeredVia): void {
    const { writer, turn, attempt } = this.#init;
    const at = Date.now();
    this.#taken.add(steer.prompt.id);
    this.#pending = this.#pending.filter((s) => s.prompt.id !== steer.prompt.id);
    writer.steerDelivered(turn, attempt, { promptId: steer.prompt.id, via, at }, steer.raw);
    writer.count(steerLatencyField(at - steer.prompt.enqueuedAt));
  }

  /** The channel of an agent whose definition says `steering: 'native'` (agents/shared/steering.ts). */
  channel(signal: AbortSignal): SteeringChannel {
    const offered = new Map<string, PendingSteer>();
    return {
      pending: () => this.#offer(offered, signal),
      delivered: (promptId: string): void => {
        const steer = offered.get(promptId);
        // Not one this channel offered, or delivered already: nothing to record.
        if (steer === undefined || this.#closed) return;
        offered.delete(promptId);
        this.deliver(steer, 'native');
      },
    };
  }

  /** The pending steers not offered yet, then each new one, until the attempt ends. */
  async *#offer(offered: Map<string, PendingSteer>, signal: AbortSignal): AsyncGenerator<Steer> {
    while (!this.#closed && !signal.aborted) {
      for (const steer of this.#pending) {
        if (offered.has(steer.prompt.id)) continue;
        offered.set(steer.prompt.id, steer);
        yield { promptId: steer.prompt.id, text: steer.prompt.text };
        if (this.#closed || signal.aborted) return;
      }
      await this.#changed(signal);
    }
  }

  /** Resolves at the next read's end, at `close`, or when `signal` aborts. */
  #changed(signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        signal.removeEventListener('abort', done);
        resolve();
      };
      signal.addEventListener('abort', done, { once: true });
      this.#waiters.push(done);
    });
  }

  #wake(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const wake of waiters) wake();
  }
}

/**
 * The prompt of the attempt that goes on after steers (the fallback): their texts in the order they were
 * accepted. A single steer is its text alone: the agent gets exactly what the caller sent.
 */
export function steeringText(steers: readonly PendingSteer[]): string {
  return steers.map((s) => s.prompt.text).join('\n\n');
}
