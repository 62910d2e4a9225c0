import { isSettledState } from '../../machines/states.ts';
import type { WorkerHeartbeat } from './caller/types.ts';
import type { SessionView } from './inspect.ts';
import { isLive, offersAgent, workerStaleMs } from './worker-liveness.ts';

/**
 * No worker can take a session's turn that waits for one: none has sent a heartbeat in the liveness
 * window (`no_live_worker`), or those alive do not offer the turn's agent (`no_worker_offers_agent`:
 * their heartbeats say which agents each runs).
 */
export interface NoLiveWorkerNotice {
  kind: 'no_live_worker' | 'no_worker_offers_agent';
  sessionId: string;
  /** The turn that waits (queued, running, in backoff…: not ended). */
  turn: number;
  /** The agent the turn runs with. */
  agent: string;
  /** Heartbeats on record (0: no worker has ever sent one); with `no_live_worker`, all older than `staleMs`. */
  workersSeen: number;
  /** Live workers (0 with `no_live_worker`). */
  workersLive: number;
  /** The live workers' agents (`no_worker_offers_agent`; empty otherwise). */
  agentsOffered: string[];
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
 * give a notice once when no live worker can take it (none live, or none offering its agent); once more
 * only after that changed in between. The window is the workers' default heartbeat's (a follower does not
 * know the workers' own setting).
 */
export class LiveWorkerCheck {
  readonly staleMs = workerStaleMs();
  readonly #workers: () => Promise<WorkerHeartbeat[]>;
  #checkedAt = 0;
  /** What was said last (`none`, `agent:<name>`), null once a worker that can take the turn was seen. */
  #said: string | null = null;

  constructor(workers: () => Promise<WorkerHeartbeat[]>) {
    this.#workers = workers;
  }

  /** A notice when no live worker can take `view`'s waiting turn and none was given since that last changed; else null. */
  async check(view: SessionView, now = Date.now()): Promise<NoLiveWorkerNotice | null> {
    const turn = view.turn;
    if (turn === null || isSettledState(turn.status)) return null;
    if (now - this.#checkedAt < LIVE_WORKERS_CHECK_MS) return null;
    this.#checkedAt = now;
    const beats = await this.#workers();
    const live = beats.filter((w) => isLive(w, Date.now(), this.staleMs));
    const agent = view.waitingFor?.agent ?? view.agent;
    const offered = live.some((w) => offersAgent(w, agent));
    const condition = live.length === 0 ? 'none' : offered ? null : `agent:${agent}`;
    if (condition === null || condition === this.#said) {
      this.#said = condition;
      return null;
    }
    this.#said = condition;
    return {
      kind: live.length === 0 ? 'no_live_worker' : 'no_worker_offers_agent',
      sessionId: view.sessionId,
      turn: turn.index,
      agent,
      workersSeen: beats.length,
      workersLive: live.length,
      agentsOffered: live.length === 0 ? [] : [...new Set(live.flatMap((w) => w.agents ?? []))].sort(),
      staleMs: this.staleMs,
      at: now,
    };
  }
}

/**
 * The notice in words: `no worker has ever sent a heartbeat`, `no worker heartbeat in the last 15 s`, or
 * `no live worker offers agent codex (they run pi, claude-code)`.
 */
export function noLiveWorkerReason(notice: NoLiveWorkerNotice): string {
  if (notice.kind === 'no_worker_offers_agent')
    return `no live worker offers agent ${notice.agent} (they run ${notice.agentsOffered.join(', ') || 'none'})`;
  return notice.workersSeen === 0
    ? 'no worker has ever sent a heartbeat'
    : `no worker heartbeat in the last ${notice.staleMs / 1000} s`;
}
