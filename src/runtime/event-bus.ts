import type { Redis } from 'ioredis';
import { cancelStage } from '../process/cancel-stages.ts';
import type { Keys } from './keys.ts';

/** `agent-wait` (session `*`): a worker handed back a session for an agent it lacks; those offering it wake it. */
export type SessionEventKind =
  'prompt' | 'cancel' | 'policy' | 'delete' | 'dispatch' | 'unqueue' | 'approval' | 'resume' | 'agent-wait';

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
    this.#started = ready(this.#subscriber).then(async () => {
      await this.#subscriber.subscribe(this.#channel);
    });
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
 * Resolves once `redis` is ready (connecting a lazy one). A SUBSCRIBE sent before then is lost without an error
 * (ioredis 5): sent while the connection still makes its handshake, it puts the connection in subscriber mode, the
 * ready check's INFO that follows is refused, the connection is dropped and made again, and a connection that was
 * never ready is not subscribed again. Its promise had resolved, so nothing of this bus would ever arrive.
 */
async function ready(redis: Redis): Promise<void> {
  if (redis.status === 'ready') return;
  if (redis.status === 'wait') {
    await redis.connect();
    return;
  }
  await new Promise<void>((resolve, reject) => {
    const done = (): void => {
      redis.off('ready', onReady);
      redis.off('end', onEnd);
    };
    const onReady = (): void => {
      done();
      resolve();
    };
    const onEnd = (): void => {
      done();
      reject(new Error('the Redis connection of the event bus closed before it was ready'));
    };
    redis.on('ready', onReady);
    redis.on('end', onEnd);
  });
}
