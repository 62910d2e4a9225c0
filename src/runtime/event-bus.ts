import type { Redis } from 'ioredis';
import { cancelStage } from '../process/cancel-stages.ts';
import type { Keys } from './keys.ts';

/** `agent-wait` (session `*`): a worker handed back a session for an agent it lacks; those offering it wake it. */
export type SessionEventKind =
  | 'prompt'
  | 'cancel'
  | 'policy'
  | 'delete'
  | 'dispatch'
  | 'unqueue'
  | 'approval'
  | 'resume'
  | 'agent-wait'
  /** A steer was accepted for the session's running turn (its attempt's steering reads the pending steers). */
  | 'steer';

export interface BusEvent {
  sessionId: string;
  kind: SessionEventKind;
}

/**
 * Redis pub/sub of session events, so that a prompt, a cancel or a policy
 * change made in any process reaches the worker that holds the session at
 * once. Contract: best effort only — what must not be lost is persisted first
 * (inbox, cancel flag, policy), and holders also look for it periodically.
 */
export class EventBus {
  readonly #subscriber: Redis;
  readonly #publisher: Redis;
  readonly #channel: string;
  readonly #listeners = new Map<string, Set<(event: BusEvent) => void>>();
  readonly #all = new Set<(event: BusEvent) => void>();
  #started: Promise<void> | null = null;

  constructor(subscriber: Redis, publisher: Redis, keys: Keys) {
    this.#subscriber = subscriber;
    this.#publisher = publisher;
    this.#channel = keys.events;
  }

  start(): Promise<void> {
    if (this.#started !== null) return this.#started;
    this.#subscriber.on('message', (channel: string, raw: string) => {
      if (channel !== this.#channel) return;
      let event: BusEvent;
      try {
        event = JSON.parse(raw) as BusEvent;
      } catch {
        // Not an event of ours: the bus is best effort, what matters is in Redis.
        return;
      }
      if (event.kind === 'cancel') cancelStage(event.sessionId, 'bus');
      for (const listener of this.#all) listener(event);
      for (const listener of this.#listeners.get(event.sessionId) ?? []) listener(event);
    });
    this.#started = whenReady(this.#subscriber)
      .then(() => this.#subscriber.subscribe(this.#channel))
      .then(() => undefined);
    return this.#started;
  }

  on(sessionId: string | '*', listener: (event: BusEvent) => void): () => void {
    if (sessionId === '*') {
      this.#all.add(listener);
      return () => this.#all.delete(listener);
    }
    const set = this.#listeners.get(sessionId) ?? new Set();
    set.add(listener);
    this.#listeners.set(sessionId, set);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.#listeners.delete(sessionId);
    };
  }

  async publish(event: BusEvent): Promise<void> {
    await this.#publisher.publish(this.#channel, JSON.stringify(event));
  }
}

/**
 * Resolves once `connection` may take a SUBSCRIBE. Between its TCP connect and its ready check (status
 * `connect`), ioredis sends a SUBSCRIBE at once (Redis allows it while loading); when its reply comes before the
 * ready check's INFO is sent, ioredis refuses that INFO ("Connection in subscriber mode"), drops the connection
 * and makes it again, and events published meanwhile are lost. In any other status the command either goes to a
 * ready connection or waits in the offline queue until the check passed.
 */
function whenReady(connection: Redis): Promise<void> {
  if (connection.status !== 'connect') return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      connection.off('ready', done);
      connection.off('end', done);
      resolve();
    };
    // 'end': the SUBSCRIBE then fails as on any closed connection, rather than waiting forever.
    connection.on('ready', done);
    connection.on('end', done);
  });
}
