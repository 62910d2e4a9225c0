import { cancelStage } from '../../process/cancel-stages.ts';
import { persistSession, stateName, type SessionActor } from '../../../machines/restore.ts';
import { QUIESCENT_MACHINE_STATES } from '../../../machines/states.ts';
import { SessionWriter, type SnapshotValue } from '../session-writer.ts';
import type { SessionStore } from '../store/session-store.ts';

/** The session one holder drives, as the parts of its loop share it. */
export interface HeldSession {
  readonly sessionId: string;
  readonly store: SessionStore;
  readonly fenced: FencedSession;
  /** The session's meta as last read (options, policy override, tenant, priority, requests). */
  meta: Record<string, string>;
}

/** States in which the session needs nothing more from this worker. */
export const QUIESCENT: ReadonlySet<string> = new Set(QUIESCENT_MACHINE_STATES);

/**
 * The session as this holder's fenced lease sees it: the actor, its snapshots staged and written
 * (batched, fenced by the lease token), and the lease given back. Once the lease is lost (`stale`)
 * nothing more is written.
 */
export class FencedSession {
  readonly writer: SessionWriter;
  /** The lease was lost (or a write found it lost): write nothing more, stop the agent. */
  stale = false;
  #actor: SessionActor | null = null;
  /** The state name of the last snapshot handed to the writer. */
  #lastState: string | null = null;
  readonly #onStale: () => void;
  readonly #sessionId: string;

  constructor(store: SessionStore, sessionId: string, token: string, onStale: () => void) {
    this.writer = new SessionWriter(store, sessionId, token);
    this.#sessionId = sessionId;
    this.#onStale = onStale;
  }

  get actor(): SessionActor | null {
    return this.#actor;
  }

  /** The actor this holder drives (restored from Redis, or new). */
  bind(actor: SessionActor): void {
    this.#actor = actor;
  }

  /** The state the restored snapshot was in (what is in Redis already). */
  restoredIn(state: string): void {
    this.#lastState = state;
  }

  /** Tells the writer the snapshot changed (it serialises it when it writes); returns the state's name. */
  stage(): string | null {
    const actor = this.#actor;
    if (actor === null || this.stale) return null;
    const state = stateName(actor.getSnapshot().value);
    this.writer.snapshot(this.#take);
    this.#lastState = state;
    return state;
  }

  readonly #take = (): SnapshotValue => {
    const actor = this.#actor;
    if (actor === null) throw new Error('no actor to serialise');
    return { json: JSON.stringify(persistSession(actor)), state: stateName(actor.getSnapshot().value) };
  };

  /**
   * A state change is written at once; a change within the same state (e.g. the agent's session
   * id recorded) goes with the next batch, within the writer's FLUSH_DELAY_MS, like the messages.
   * So does a change to a quiescent state: the loop is about to give the session back, and that
   * release writes the batch in the same call (or the timer does, if the loop goes on).
   */
  persist(): void {
    const previous = this.#lastState;
    const state = this.stage();
    if (state === null) return;
    if (state === 'cancelled' && previous !== 'cancelled') cancelStage(this.#sessionId, 'machine');
    if (state === previous || QUIESCENT.has(state)) {
      this.writer.soon();
      return;
    }
    // Any other failure stays in `writer.failure`, which the loop reads at its next turn.
    this.writer.flush().catch((error: Error) => {
      if (error.name === 'StaleLeaseError') this.#onStale();
    });
  }

  /** Stops the actor; its pending snapshot is serialised first (a stopped actor's is not a session's). */
  stopActor(): void {
    if (!this.stale) this.writer.materialize();
    this.#actor?.stop();
  }

  /** Gives the lease back with the last batch: 1 given back, 0 still held (prompts or a cancel arrived meanwhile). Rejects when the lease was lost. */
  release(mode: 'idle' | 'keep'): Promise<1 | 0> {
    return this.writer.release(mode);
  }
}
