import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { SESSION_STATES, SETTLED_STATES } from '../../machines/states.ts';
import { CHANGED_WINDOW_MS, lifecycleKeys } from './lifecycle/keys.ts';
import type { Runtime, SessionView } from './runtime.ts';
import { internals } from './internals.ts';

/**
 * Prometheus metrics of a sessiond deployment, derived from what the runtime
 * stores in Redis when scraped — at most once per `cacheMs` — at a cost that
 * follows the activity, not the number of sessions stored: the counts by state
 * are the sizes of the per-state index sets, and only the sessions in the
 * `changed` index since the last refresh are read (their snapshots and
 * transition histories), plus the BullMQ queue and worker heartbeats.
 *
 * Counters and histograms count what this process has observed: every ended
 * attempt and turn of a session's latest turn, each once (the first refresh
 * after start counts what changed in the hour before). A turn is replaced in its
 * session's snapshot by the next one, so an earlier turn that started and
 * ended entirely between two refreshes is not counted; `start(everyMs)`
 * refreshes in the background too, which keeps that window short. Cancel latency comes from the transition history (kept
 * for the last 1000 transitions of a session), so none is missed.
 */

const QUEUE_STATES = ['waiting', 'active', 'delayed', 'prioritized', 'waiting-children', 'paused', 'completed', 'failed'] as const;
const ENDED_TURN: ReadonlySet<string> = new Set(SETTLED_STATES);

export interface MetricsOptions {
  /** A scrape within this long of the last refresh is answered from it. Default 3000 ms. */
  cacheMs?: number;
  /** A worker is live when its heartbeat is at most this old. Default 15 000 ms. */
  workerStaleMs?: number;
  /** Sessions refreshed concurrently. Default 32. */
  concurrency?: number;
}

interface Seen {
  /** meta `updatedAt|state` when last processed: unchanged means nothing to do. */
  version: string;
  turn: number;
  attempts: Set<number>;
  turnCounted: boolean;
  /** `at` of the last history entry processed for cancel latency. */
  historyAt: number;
  /** When this process last looked at the session (entries not looked at for CHANGED_WINDOW_MS are dropped). */
  observedAt: number;
}

/** How far back each refresh looks again in the `changed` index. */
const CHANGED_MARGIN_MS = 10_000;

export class RuntimeMetrics {
  readonly registry = new Registry();
  readonly #runtime: Runtime;
  readonly #cacheMs: number;
  readonly #workerStaleMs: number;
  readonly #concurrency: number;
  readonly #seen = new Map<string, Seen>();
  #refreshedAt = 0;
  #refreshing: Promise<void> | null = null;
  /** The `changed` index is read from here on (null: the last CHANGED_WINDOW_MS, at the first refresh). */
  #since: number | null = null;
  #timer: NodeJS.Timeout | null = null;

  readonly #sessions: Gauge<'state'>;
  readonly #attempts: Counter<'outcome' | 'category'>;
  readonly #retries: Counter<'category'>;
  readonly #turnDuration: Histogram<'status'>;
  readonly #cancelLatency: Histogram;
  readonly #queueJobs: Gauge<'state'>;
  readonly #workers: Gauge;
  readonly #approvalsWaiting: Gauge;
  readonly #refreshErrors: Counter;
  readonly #limitInUse: Gauge<'limit'>;
  readonly #limitWaiting: Gauge<'limit'>;

  constructor(runtime: Runtime, options: MetricsOptions = {}) {
    this.#runtime = runtime;
    this.#cacheMs = options.cacheMs ?? 3000;
    this.#workerStaleMs = options.workerStaleMs ?? 15_000;
    this.#concurrency = options.concurrency ?? 32;
    const registers = [this.registry];
    this.#sessions = new Gauge({ name: 'sessiond_sessions', help: 'Sessions by machine state (queued: first prompt not yet taken)', labelNames: ['state'], registers });
    this.#attempts = new Counter({
      name: 'sessiond_attempts_total',
      help: 'Ended agent attempts by outcome (completed, failed, interrupted, cancelled) and failure category (none when not failed)',
      labelNames: ['outcome', 'category'],
      registers,
    });
    this.#retries = new Counter({
      name: 'sessiond_retries_total',
      help: 'Retries scheduled (a failed attempt followed by a backoff), by the failure category',
      labelNames: ['category'],
      registers,
    });
    this.#turnDuration = new Histogram({
      name: 'sessiond_turn_duration_seconds',
      help: 'Duration of ended turns, from the first attempt start to the final state, by final status',
      labelNames: ['status'],
      buckets: [0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600],
      registers,
    });
    this.#cancelLatency = new Histogram({
      name: 'sessiond_cancel_latency_seconds',
      help: 'From the session machine receiving a cancel to the turn being cancelled (the agent process tree gone)',
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 8, 13, 30],
      registers,
    });
    this.#queueJobs = new Gauge({ name: 'sessiond_queue_jobs', help: 'BullMQ activation jobs by queue state', labelNames: ['state'], registers });
    this.#workers = new Gauge({ name: 'sessiond_workers', help: 'Workers whose heartbeat was seen recently', registers });
    this.#limitInUse = new Gauge({ name: 'sessiond_limit_in_use', help: 'Attempts holding a slot of each fleet limit (all its keys)', labelNames: ['limit'], registers });
    this.#limitWaiting = new Gauge({
      name: 'sessiond_limit_waiting',
      help: 'Sessions waiting for each fleet limit (capacity, a cooldown or paused dispatch)',
      labelNames: ['limit'],
      registers,
    });
    this.#approvalsWaiting = new Gauge({
      name: 'sessiond_approvals_waiting',
      help: 'Permission requests of agents waiting for an operator (approve / deny), fleet-wide',
      registers,
    });
    this.#refreshErrors = new Counter({ name: 'sessiond_metrics_refresh_errors_total', help: 'Metric refreshes that failed (Redis unreachable…)', registers });
  }

  /** Refreshes every `everyMs` in the background (besides scrapes) until `stop()`. */
  start(everyMs = 5000): void {
    if (this.#timer !== null) return;
    this.#timer = setInterval(() => void this.refresh(), everyMs);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The metrics in Prometheus text format, refreshed when older than `cacheMs`. */
  async render(): Promise<string> {
    await this.refresh();
    return this.registry.metrics();
  }

  /** Refreshes unless the last refresh is recent; concurrent callers share one refresh. */
  async refresh(force = false): Promise<void> {
    if (!force && Date.now() - this.#refreshedAt < this.#cacheMs) return;
    if (this.#refreshing === null) {
      this.#refreshing = this.#refresh()
        .then(() => {
          this.#refreshedAt = Date.now();
        })
        .catch(() => {
          this.#refreshErrors.inc();
        })
        .finally(() => {
          this.#refreshing = null;
        });
    }
    await this.#refreshing;
  }

  async #refresh(): Promise<void> {
    const runtime = this.#runtime;
    const lk = lifecycleKeys(internals(runtime).keys);
    const now = Date.now();
    // Only what changed since the last refresh is read (the `changed` index, kept by the workers'
    // index writes), and the counts by state are the per-state sets' sizes: the cost follows the
    // activity, not the number of sessions stored.
    const since = this.#since ?? now - CHANGED_WINDOW_MS;
    const pipeline = internals(runtime).redis.pipeline();
    for (const state of SESSION_STATES) pipeline.zcard(lk.byState(state));
    pipeline.zrangebyscore(lk.changed, since, '+inf');
    const [replies, counts, workers, limits, approvals] = await Promise.all([
      pipeline.exec(),
      internals(runtime).queue.jobCounts(...QUEUE_STATES),
      runtime.workers(),
      runtime.limitsView(),
      internals(runtime).approvals.waitingCount(now),
    ]);
    this.#limitInUse.reset();
    this.#limitWaiting.reset();
    for (const limit of limits.limits) {
      this.#limitInUse.set({ limit: limit.name }, limit.inUse);
      this.#limitWaiting.set({ limit: limit.name }, limit.waiting);
    }
    this.#approvalsWaiting.set(approvals);
    const reply = (i: number): unknown => {
      const [error, value] = replies?.[i] ?? [null, null];
      if (error !== null) throw error;
      return value;
    };
    for (const state of QUEUE_STATES) this.#queueJobs.set({ state }, counts[state] ?? 0);
    this.#workers.set(workers.filter((w) => now - w.lastSeen <= this.#workerStaleMs).length);
    this.#sessions.reset();
    SESSION_STATES.forEach((state, i) => this.#sessions.set({ state }, Number(reply(i))));

    const ids = reply(SESSION_STATES.length) as string[];
    for (let i = 0; i < ids.length; i += this.#concurrency) {
      await Promise.all(ids.slice(i, i + this.#concurrency).map((id) => this.#observe(id)));
    }
    // Index writes trail the sessions' own by a tick, and clocks of hosts differ: look a little back next time.
    this.#since = now - CHANGED_MARGIN_MS;
    for (const [id, seen] of this.#seen) if (seen.observedAt < now - CHANGED_WINDOW_MS) this.#seen.delete(id);
  }

  /** Counts what changed in the session since the last refresh; returns its state (null: gone). */
  async #observe(sessionId: string): Promise<string | null> {
    const meta = await internals(this.#runtime).store.meta(sessionId);
    if (meta === null) {
      this.#seen.delete(sessionId);
      return null;
    }
    const state = meta.state ?? 'queued';
    const version = `${meta.updatedAt ?? meta.createdAt ?? ''}|${meta.state ?? ''}`;
    const seen = this.#seen.get(sessionId);
    if (seen !== undefined && seen.version === version) {
      seen.observedAt = Date.now();
      return state;
    }
    const view = await this.#runtime.getSession(sessionId);
    if (view !== null) this.#seen.set(sessionId, this.#count(view, version, seen));
    return state;
  }

  #count(view: SessionView, version: string, previous: Seen | undefined): Seen {
    const turn = view.context?.turn ?? null;
    const seen: Seen =
      previous !== undefined && turn !== null && previous.turn === turn.index
        ? { ...previous, version, observedAt: Date.now() }
        : { version, turn: turn?.index ?? 0, attempts: new Set(), turnCounted: false, historyAt: previous?.historyAt ?? 0, observedAt: Date.now() };
    if (turn !== null) {
      for (const a of turn.attempts) {
        if (a.outcome === null || seen.attempts.has(a.attempt)) continue;
        seen.attempts.add(a.attempt);
        this.#attempts.inc({ outcome: a.outcome, category: a.outcome === 'failed' || a.outcome === 'interrupted' ? (a.category ?? 'unknown') : 'none' });
        if (a.delayMs !== null) this.#retries.inc({ category: a.category ?? 'unknown' });
      }
      if (!seen.turnCounted && ENDED_TURN.has(turn.status) && turn.endedAt !== null) {
        seen.turnCounted = true;
        this.#turnDuration.observe({ status: turn.status }, Math.max(0, turn.endedAt - turn.startedAt) / 1000);
      }
    }
    // Cancel latency: a `session.cancel` transition, then the next transition into `cancelled`.
    let cancelAt: number | null = null;
    for (const t of view.history) {
      if (t.event === 'session.cancel' && t.to !== 'cancelled') cancelAt = t.at;
      if (t.to !== 'cancelled' || t.at <= seen.historyAt) continue;
      const from = t.event === 'session.cancel' ? t.at : cancelAt;
      if (from !== null) this.#cancelLatency.observe(Math.max(0, t.at - from) / 1000);
      cancelAt = null;
    }
    const last = view.history.at(-1);
    if (last !== undefined) seen.historyAt = Math.max(seen.historyAt, last.at);
    return seen;
  }
}
