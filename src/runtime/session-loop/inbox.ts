import { createActor, fromCallback, type Actor, type EventObject } from 'xstate';
import type { EventBus, SessionEventKind } from '../event-bus.ts';

/** What the holder is asked to look at in Redis again: each has its reader in the loop (see active-session.ts). */
export type InboxRequest = 'policy' | 'prompt' | 'cancel' | 'unqueue' | 'resume';

/** What arrives for the session while it is held: a bus event of its own, or the poll's tick. */
export type ArrivalEvent = { type: SessionEventKind } | { type: 'poll' };

const REQUESTS: ReadonlySet<string> = new Set<InboxRequest>(['policy', 'prompt', 'cancel', 'unqueue', 'resume']);

/**
 * The session's arrivals as a callback actor: its bus events, and a poll every `pollMs` (the bus is
 * best effort; what must not be lost is in Redis), emitted to the actor's listeners. Stopping the
 * actor unsubscribes both.
 */
const arrivals = fromCallback<EventObject, { bus: EventBus; sessionId: string; pollMs: number }, ArrivalEvent>(
  ({ input, emit }) => {
    const unsubscribe = input.bus.on(input.sessionId, (event) => emit({ type: event.kind }));
    const poll = setInterval(() => emit({ type: 'poll' }), input.pollMs);
    return () => {
      clearInterval(poll);
      unsubscribe();
    };
  },
);

/**
 * The holder's inbox: what arrived for the session (a prompt, a cancel, a policy change, a removal,
 * a resume, an approval decision) becomes a pending request, and wakes the loop if it waits. The
 * loop takes the pending requests in its own order, each at most once per pass.
 */
export class HolderInbox {
  /** Looked at once at the start: what arrived while nobody held the session. */
  readonly #pending = new Set<InboxRequest>(['prompt', 'cancel', 'policy']);
  #wake: (() => void) | null = null;
  /** A poke came while the loop did not wait (it was busy): its next wait ends at once. */
  #woken = false;
  #actor: Actor<typeof arrivals> | null = null;

  /** Starts listening: to the session's bus events and to the poll. */
  listen(bus: EventBus, sessionId: string, pollMs: number): void {
    const actor = createActor(arrivals, { input: { bus, sessionId, pollMs } });
    actor.on('*', (event) => {
      if (event.type === 'poll') {
        this.#pending.add('prompt');
        this.#pending.add('cancel');
      } else if (REQUESTS.has(event.type)) {
        this.#pending.add(event.type as InboxRequest);
      }
      this.poke();
    });
    this.#actor = actor;
    actor.start();
  }

  /** Stops listening. */
  close(): void {
    this.#actor?.stop();
    this.#actor = null;
  }

  /** Subscribes to "an approval decision was stored for this session" (an attempt's gate); returns the unsubscribe. */
  onApproval(listener: () => void): () => void {
    const actor = this.#actor;
    if (actor === null) return () => undefined;
    const subscription = actor.on('approval', listener);
    return () => subscription.unsubscribe();
  }

  /** Subscribes to "look at the pending steers again": a steer accepted (the bus) or the poll's tick; returns the unsubscribe. */
  onSteer(listener: () => void): () => void {
    const actor = this.#actor;
    if (actor === null) return () => undefined;
    const steer = actor.on('steer', listener);
    const poll = actor.on('poll', listener);
    return () => {
      steer.unsubscribe();
      poll.unsubscribe();
    };
  }

  /** Asks the loop to look at `request` (again). */
  ask(request: InboxRequest): void {
    this.#pending.add(request);
  }

  /** No need to look at `request`: what it would read is known already. */
  skip(request: InboxRequest): void {
    this.#pending.delete(request);
  }

  /** True once per arrival: `request` was pending, and is taken now. */
  take(request: InboxRequest): boolean {
    return this.#pending.delete(request);
  }

  /** Wakes the loop if it waits; a poke while it is busy is kept for its next wait. */
  poke(): void {
    const wake = this.#wake;
    this.#wake = null;
    if (wake === null) this.#woken = true;
    else wake();
  }

  /** Resolves at the next arrival or poke; at once when a request is pending or a poke came meanwhile. */
  next(): Promise<void> {
    if (this.#woken || this.#pending.size > 0) {
      this.#woken = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      this.#wake = resolve;
    });
  }
}
