import type { SessionContext } from '../../../machines/types.ts';
import type { UsageTotals } from '../usage/usage.ts';
import { attemptTraceparent, newTurnTrace, parseTurnTrace, type TurnTrace } from './trace-context.ts';
import type { Tracing } from './tracing.ts';

const TURN_ENDED = new Set(['completed', 'failed', 'cancelled']);

/**
 * The spans of one session while a worker drives it (ActiveSession): the turn's trace context is
 * taken from the session's meta (stored by an earlier holder) or made and stored before the turn's
 * first attempt here; each attempt's span is made once its outcome is recorded, the turn's once it
 * ended. What had ended before this activation was traced by the holder that saw it end.
 */
export class SessionTracer {
  readonly #tracing: Tracing;
  readonly #sessionId: string;
  readonly #worker: string;
  #trace: TurnTrace | null = null;
  #storedTrace: string | undefined;
  /** The turn whose ended attempts are in `#done` (only the current turn's are kept). */
  #turn = -1;
  readonly #done = new Set<number>();
  #turnDone = false;
  /** `turn/attempt` → the tokens its terminal message reported (the current turn's only). */
  readonly #tokens = new Map<string, UsageTotals>();

  constructor(tracing: Tracing, sessionId: string, worker: string) {
    this.#tracing = tracing;
    this.#sessionId = sessionId;
    this.#worker = worker;
  }

  /** What the activation starts from: the stored trace, and what had already ended (traced before). */
  restore(storedTrace: string | undefined, context: SessionContext | null): void {
    this.#storedTrace = storedTrace;
    const turn = context?.turn ?? null;
    if (turn === null) return;
    this.#turn = turn.index;
    for (const a of turn.attempts) if (a.outcome !== null) this.#done.add(a.attempt);
    this.#turnDone = TURN_ENDED.has(turn.status);
  }

  #traceOf(turn: number): TurnTrace | null {
    if (this.#trace?.turn === turn) return this.#trace;
    const stored = parseTurnTrace(this.#storedTrace, turn);
    if (stored !== null) this.#trace = stored;
    return stored;
  }

  /**
   * Before an attempt starts: its `TRACEPARENT`, and the trace context to store with the session
   * when this is the turn's first (the caller writes it before the agent starts).
   */
  beginAttempt(turn: number, attempt: number): { traceparent: string; store: string | null } {
    let trace = this.#traceOf(turn);
    let store: string | null = null;
    if (trace === null) {
      trace = newTurnTrace(turn);
      this.#trace = trace;
      store = JSON.stringify(trace);
      this.#storedTrace = store;
    }
    return { traceparent: attemptTraceparent(trace, attempt), store };
  }

  /** The tokens an attempt's terminal message reported (they go on its span). */
  tokens(turn: number, attempt: number, usage: UsageTotals): void {
    if (turn >= this.#turn) this.#tokens.set(`${turn}/${attempt}`, usage);
  }

  /** Every snapshot of the session: spans for what ended since. */
  observe(context: SessionContext, labels: { agent: string; model: string }): void {
    const turn = context.turn;
    if (turn === null) return;
    if (turn.index !== this.#turn) {
      this.#turn = turn.index;
      this.#done.clear();
      this.#turnDone = false;
      for (const key of this.#tokens.keys()) if (!key.startsWith(`${turn.index}/`)) this.#tokens.delete(key);
    }
    const trace = this.#traceOf(turn.index);
    for (const a of turn.attempts) {
      if (a.outcome === null || this.#done.has(a.attempt)) continue;
      this.#done.add(a.attempt);
      if (trace === null) continue;
      this.#tracing.attempt(trace, {
        sessionId: this.#sessionId,
        turn: turn.index,
        attempt: a.attempt,
        ...labels,
        worker: this.#worker,
        outcome: a.outcome,
        category: a.category,
        errorText: a.errorText,
        retryDelayMs: a.delayMs,
        startedAt: a.startedAt,
        endedAt: a.endedAt ?? Date.now(),
        tokens: this.#tokens.get(`${turn.index}/${a.attempt}`) ?? null,
      });
    }
    if (!this.#turnDone && TURN_ENDED.has(turn.status)) {
      this.#turnDone = true;
      if (trace === null) return;
      const last = turn.attempts.at(-1);
      this.#tracing.turn(trace, {
        sessionId: this.#sessionId,
        turn: turn.index,
        ...labels,
        worker: this.#worker,
        outcome: turn.status,
        category: turn.failureReason ?? (turn.status === 'failed' ? (last?.category ?? null) : null),
        attempts: turn.attempts.length,
        startedAt: turn.startedAt,
        endedAt: turn.endedAt ?? Date.now(),
      });
    }
  }
}
