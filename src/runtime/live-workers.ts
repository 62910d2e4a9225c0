import { isSettledState } from '../../machines/states.ts';
import type { WorkerHeartbeat } from './caller/types.ts';
import type { SessionView } from './inspect.ts';
import { isLive, workerStaleMs } from './worker-liveness.ts';

/** No worker can take a session's turn that waits for one: none has sent a heartbeat in the liveness window. */
export interface NoLiveWorkerNotice {
  kind: 'no_live_worker';
  sessionId: string;
  /** The turn that waits (queued, running, in backoff…: not ended). */
  turn: number;
  /** Heartbeats on record, all older than `staleMs` (0: no worker has ever sent one). */
  workersSeen: number;
  /** The liveness window: a worker whose last heartbeat is older counts as gone. */
  staleMs: number;
  /** When this was found (epoch ms). */
  at: number;
}

/** How often the heartbeats are read while a turn waits. */
export const LIVE_WORKERS_CHECK_MS = 2_000;

/**
 * One rule for every follower of a session (the CLI's `--follow` and `watch`, the library's `watch`): while
 * the latest turn has not ended, look at the workers' heartbeats (at most every LIVE_WORKERS_CHECK_MS) and
 * give a notice once when none is live; once more only after a live worker was seen in between. The window
 * is the workers' default heartbeat's (a follower does not know the workers' own setting).
 */
export class LiveWorkerCheck {
  readonly staleMs = workerStaleMs();
  readonly #workers: () => Promise<WorkerHeartbeat[]>;
  #checkedAt = 0;
  #said = false;

  constructor(workers: () => Promise<WorkerHeartbeat[]>) {
    this.#workers = workers;
  }

  /** A notice when no live worker can take `view`'s waiting turn and none was given since one was last seen; else null. */
  async check(view: SessionView, now = Date.now()): Promise<NoLiveWorkerNotice | null> {
    const turn = view.turn;
    if (turn === null || isSettledState(turn.status)) return null;
    if (now - this.#checkedAt < LIVE_WORKERS_CHECK_MS) return null;
    this.#checkedAt = now;
    const beats = await this.#workers();
    const live = beats.some((w) => isLive(w, Date.now(), this.staleMs));
    if (live || this.#said) {
      this.#said = !live && this.#said;
      return null;
    }
    this.#said = true;
    return {
      kind: 'no_live_worker',
      sessionId: view.sessionId,
      turn: turn.index,
      workersSeen: beats.length,
      staleMs: this.staleMs,
      at: now,
    };
  }
}

/** The notice in words: `no worker has ever sent a heartbeat` or `no worker heartbeat in the last 15 s`. */
export function noLiveWorkerReason(notice: NoLiveWorkerNotice): string {
  return notice.workersSeen === 0
    ? 'no worker has ever sent a heartbeat'
    : `no worker heartbeat in the last ${notice.staleMs / 1000} s`;
}
