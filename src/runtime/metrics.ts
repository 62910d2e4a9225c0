import { Registry } from 'prom-client';
import { metricFamilies, type MetricFamilies } from './metric-families.ts';
import { SESSION_STATES, SETTLED_STATES } from '../../machines/states.ts';
import { CHANGED_WINDOW_MS, lifecycleKeys } from './lifecycle/keys.ts';
import type { Runtime, SessionRecord } from './runtime.ts';
import { counterTotals, foldCounters, parseField } from './counters.ts';
import { sessionUsage, TOKEN_KINDS, type SessionUsage, type UsageTotals } from './usage/usage.ts';
import { internals } from './internals.ts';
import { isLive, workerStaleMs } from './worker-liveness.ts';
import { webhookBacklog } from './webhooks/outbox.ts';

/**
 * Prometheus metrics of a sessiond deployment, derived from what the runtime
 * stores in Redis when scraped — at most once per `cacheMs` — at a cost that
 * follows the activity, not the number of sessions stored: the counts by state
 * are the sizes of the per-state index sets, and only the sessions in the
 * `changed` index since the last refresh are read (their snapshots and
 * transition histories), plus the BullMQ queue and worker heartbeats.
 *
 * Attempts and retries are counted where they happen (counters.ts): in each session's own keys, by
 * the fenced write that records the attempt's end, folded into fleet-wide totals in Redis by every
 * refresh for the sessions that changed. So they are fleet totals, the same from every `serve`, and
 * none is missed, however short a turn. The histograms count what this process has observed: every
 * ended turn of a session's latest turn, once, from its start on (the first refresh only folds the
 * counters of what changed in the hour before, and keeps nothing of it). A turn is replaced in its session's snapshot by the next one, so an earlier turn
 * that started and ended entirely between two refreshes is not in the turn-duration histogram;
 * `start(everyMs)` refreshes in the background too, which keeps that window short. Cancel latency
 * comes from the transition history (kept for the last 1000 transitions of a session), so none is missed.
 */

const QUEUE_STATES = [
  'waiting',
  'active',
  'delayed',
  'prioritized',
  'waiting-children',
  'paused',
  'completed',
  'failed',
] as const;
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
  turnCounted: boolean;
  /** `at` of the last history entry processed for cancel latency. */
  historyAt: number;
  /** When this process last looked at the session (entries not looked at for CHANGED_WINDOW_MS are dropped). */
  observedAt: number;
  /** The session's token sums per agent and model when last counted (`agent\tmodel` → kind → tokens). */
  tokens: Map<string, UsageTotals>;
}

/** Distinct agent/model label pairs of `sessiond_tokens_total`; further pairs are counted under model `other`. */
const MAX_TOKEN_LABELS = 200;

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
  /** The `changed` index is read from here on (null: the first refresh, which folds the last CHANGED_WINDOW_MS). */
  #since: number | null = null;
  #timer: NodeJS.Timeout | null = null;
  /** The fleet totals of the attempt and retry counters as last reported by this process. */
  readonly #reported = new Map<string, number>();

  readonly #metrics: MetricFamilies;
  /** The agent/model pairs `sessiond_tokens_total` has label values for (at most MAX_TOKEN_LABELS). */
  readonly #tokenLabels = new Set<string>();
  /** Sessions seen parked at a quota wall, with its reset (bounded by the parked sessions; left when seen otherwise or gone). */
  readonly #parked = new Map<string, number>();

  constructor(runtime: Runtime, options: MetricsOptions = {}) {
    this.#runtime = runtime;
    this.#cacheMs = options.cacheMs ?? 3000;
    this.#workerStaleMs = options.workerStaleMs ?? workerStaleMs();
    this.#concurrency = options.concurrency ?? 32;
    this.#metrics = metricFamilies(this.registry);
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
        // Counted: sessiond_metrics_refresh_errors_total says so.
        .catch(() => {
          this.#metrics.refreshErrors.inc();
        })
        .finally(() => {
          this.#refreshing = null;
        });
    }
    await this.#refreshing;
  }

  async #refresh(): Promise<void> {
    const runtime = this.#runtime;
    const now = Date.now();
    // Only what changed since the last refresh is read (the `changed` index, kept by the workers'
    // index writes), and the counts by state are the per-state sets' sizes: the cost follows the
    // activity, not the number of sessions stored.
    const since = this.#since ?? now - CHANGED_WINDOW_MS;
    // One pipeline per index shard (each a slot of its own, see keys.ts): its state sets' sizes and what changed in it.
    const shards = await internals(runtime).queue.fleetShards();
    const perShard = Array.from({ length: shards }, (_, n) => {
      const lk = lifecycleKeys(internals(runtime).keys, n);
      const pipeline = internals(runtime).redis.pipeline();
      for (const state of SESSION_STATES) pipeline.zcard(lk.byState(state));
      pipeline.zrangebyscore(lk.changed, since, '+inf');
      return pipeline.exec();
    });
    const [shardReplies, counts, workers, limits, approvals, webhooks] = await Promise.all([
      Promise.all(perShard),
      internals(runtime).queue.jobCounts(...QUEUE_STATES),
      runtime.workers(),
      runtime.limitsView(),
      internals(runtime).approvals.waitingCount(now),
      webhookBacklog(internals(runtime).redis, internals(runtime).keys, now),
    ]);
    this.#metrics.webhookDeadLetters.set(webhooks.dead);
    this.#metrics.webhookOldestDue.set(webhooks.lagSeconds);
    this.#metrics.limitInUse.reset();
    this.#metrics.limitWaiting.reset();
    for (const limit of limits.limits) {
      this.#metrics.limitInUse.set({ limit: limit.name }, limit.inUse);
      this.#metrics.limitWaiting.set({ limit: limit.name }, limit.waiting);
    }
    this.#metrics.approvalsWaiting.set(approvals);
    const reply = (i: number, shard: number): unknown => {
      const [error, value] = shardReplies[shard]?.[i] ?? [null, null];
      if (error !== null) throw error;
      return value;
    };
    for (const state of QUEUE_STATES) this.#metrics.queueJobs.set({ state }, counts[state] ?? 0);
    this.#metrics.workers.set(workers.filter((w) => isLive(w, now, this.#workerStaleMs)).length);
    this.#metrics.sessions.reset();
    SESSION_STATES.forEach((state, i) =>
      this.#metrics.sessions.set(
        { state },
        shardReplies.reduce((sum, _, shard) => sum + Number(reply(i, shard)), 0),
      ),
    );

    const ids = shardReplies.flatMap((_, shard) => reply(SESSION_STATES.length, shard) as string[]);
    if (this.#since === null) {
      // At start, what changed in the hour before is only folded (its counters into the fleet totals,
      // which no serve may have done yet), and nothing of it is kept: the histograms count from now on.
      await this.#each(ids, (id) => foldCounters(internals(runtime).redis, internals(runtime).keys, id));
      // The sessions parked at a quota wall are observed, for their reset (as many as are parked).
      const parked = await Promise.all(
        Array.from({ length: shards }, (_, n) =>
          internals(runtime).redis.zrange(lifecycleKeys(internals(runtime).keys, n).byState('parked'), 0, -1),
        ),
      );
      await this.#each(parked.flat(), (id) => this.#observe(id));
    } else {
      await this.#each(ids, (id) => this.#observe(id));
    }
    this.#report(await counterTotals(internals(runtime).redis, internals(runtime).keys));
    const parkedNow = shardReplies.reduce(
      (sum, _, shard) => sum + Number(reply(SESSION_STATES.indexOf('parked'), shard)),
      0,
    );
    if (parkedNow === 0) this.#parked.clear();
    this.#metrics.parkedNextReset.reset();
    if (this.#parked.size > 0) this.#metrics.parkedNextReset.set(Math.min(...this.#parked.values()) / 1000);
    // Index writes trail the sessions' own by a tick, and clocks of hosts differ: look a little back next time.
    this.#since = now - CHANGED_MARGIN_MS;
    for (const [id, seen] of this.#seen) if (seen.observedAt < now - CHANGED_WINDOW_MS) this.#seen.delete(id);
  }

  async #each(ids: readonly string[], run: (id: string) => Promise<unknown>): Promise<void> {
    for (let i = 0; i < ids.length; i += this.#concurrency)
      await Promise.all(ids.slice(i, i + this.#concurrency).map(run));
  }

  /** Brings the attempt and retry counters up to the fleet totals (they only grow; a total that went down, e.g. a flushed Redis, is left as it was). */
  #report(totals: Map<string, number>): void {
    for (const [field, total] of totals) {
      const added = total - (this.#reported.get(field) ?? 0);
      this.#reported.set(field, total);
      if (added <= 0) continue;
      const parsed = parseField(field);
      if (parsed?.kind === 'attempts')
        this.#metrics.attempts.inc({ outcome: parsed.outcome, category: parsed.category }, added);
      else if (parsed?.kind === 'retries') this.#metrics.retries.inc({ category: parsed.category }, added);
      else if (parsed?.kind === 'walls') this.#metrics.quotaWalls.inc({ attempts: parsed.attempts }, added);
      else if (parsed?.kind === 'egress') this.#metrics.egressRefused.inc({ reason: parsed.reason }, added);
      else if (parsed?.kind === 'webhooks') this.#metrics.webhookDeliveries.inc({ outcome: parsed.outcome }, added);
      else if (parsed?.kind === 'whenBusy')
        this.#metrics.whenBusy.inc({ strategy: parsed.strategy, effect: parsed.effect }, added);
      else if (parsed?.kind === 'schedule') this.#metrics.scheduleFirings.inc({ outcome: parsed.outcome }, added);
      else if (parsed?.kind === 'steerLatency')
        for (let n = 0; n < added; n++) this.#metrics.steerLatency.observe(parsed.seconds);
    }
  }

  /** Counts what changed in the session since the last refresh; returns its state (null: gone). */
  async #observe(sessionId: string): Promise<string | null> {
    const meta = await internals(this.#runtime).store.meta(sessionId);
    if (meta === null) {
      this.#seen.delete(sessionId);
      this.#parked.delete(sessionId);
      return null;
    }
    const state = meta.state ?? 'queued';
    const version = `${meta.updatedAt ?? meta.createdAt ?? ''}|${meta.state ?? ''}|${meta.usage ?? ''}`;
    const seen = this.#seen.get(sessionId);
    if (seen !== undefined && seen.version === version) {
      seen.observedAt = Date.now();
      return state;
    }
    // Its attempt and retry counters into the fleet totals (a fold adds only what is new).
    await foldCounters(internals(this.#runtime).redis, internals(this.#runtime).keys, sessionId);
    const view = await this.#runtime.getSession(sessionId);
    if (view !== null) {
      const next = this.#count(view, version, seen);
      next.tokens = this.#countTokens(sessionUsage(meta), seen, Number(meta.createdAt ?? 0));
      this.#seen.set(sessionId, next);
    }
    return state;
  }

  /**
   * Adds what the session's token sums grew by since this process last counted them. A session it
   * has not seen (or forgot: unseen for CHANGED_WINDOW_MS) counts all its sums when it was created
   * within that window, else only its latest turn's attempts that ended within it (neither can
   * have been counted before); its sums become the baseline. Returns the sums counted so far.
   */
  #countTokens(usage: SessionUsage | null, previous: Seen | undefined, createdAt: number): Map<string, UsageTotals> {
    const now = new Map<string, UsageTotals>();
    if (usage === null) return previous?.tokens ?? now;
    for (const m of usage.byModel) now.set(`${m.agent}\t${m.model}`, m.usage);
    const add = (key: string, delta: (kind: (typeof TOKEN_KINDS)[number]) => number): void => {
      const [agent = '', named = ''] = key.split('\t');
      // Models come from callers: past MAX_TOKEN_LABELS pairs, further ones are counted as `other`.
      if (!this.#tokenLabels.has(key) && this.#tokenLabels.size < MAX_TOKEN_LABELS) this.#tokenLabels.add(key);
      const model = this.#tokenLabels.has(key) ? named : 'other';
      for (const kind of TOKEN_KINDS) {
        const n = delta(kind);
        if (n > 0) this.#metrics.tokens.inc({ agent, model, kind }, n);
      }
    };
    if (previous !== undefined) {
      for (const [key, sums] of now) add(key, (kind) => (sums[kind] ?? 0) - (previous.tokens.get(key)?.[kind] ?? 0));
      return now;
    }
    const turn = usage.turn;
    const horizon = Date.now() - CHANGED_WINDOW_MS;
    if (createdAt >= horizon) {
      for (const [key, sums] of now) add(key, (kind) => sums[kind] ?? 0);
      return now;
    }
    if (turn !== null)
      for (const a of turn.attempts) if (a.at >= horizon) add(`${a.agent}\t${a.model}`, (kind) => a.usage[kind] ?? 0);
    return now;
  }

  #count(view: SessionRecord, version: string, previous: Seen | undefined): Seen {
    const turn = view.context?.turn ?? null;
    const wall = view.state === 'parked' ? (turn?.quotaWall ?? null) : null;
    if (wall !== null) this.#parked.set(view.sessionId, wall.until);
    else this.#parked.delete(view.sessionId);
    const seen: Seen =
      previous !== undefined && turn !== null && previous.turn === turn.index
        ? { ...previous, version, observedAt: Date.now() }
        : {
            version,
            turn: turn?.index ?? 0,
            turnCounted: false,
            historyAt: previous?.historyAt ?? 0,
            observedAt: Date.now(),
            tokens: previous?.tokens ?? new Map(),
          };
    if (turn !== null) {
      if (!seen.turnCounted && ENDED_TURN.has(turn.status) && turn.endedAt !== null) {
        seen.turnCounted = true;
        this.#metrics.turnDuration.observe({ status: turn.status }, Math.max(0, turn.endedAt - turn.startedAt) / 1000);
      }
    }
    // Cancel latency: a `session.cancel` transition, then the next transition into `cancelled`.
    let cancelAt: number | null = null;
    for (const t of view.history) {
      if (t.event === 'session.cancel' && t.to !== 'cancelled') cancelAt = t.at;
      if (t.to !== 'cancelled' || t.at <= seen.historyAt) continue;
      const from = t.event === 'session.cancel' ? t.at : cancelAt;
      if (from !== null) this.#metrics.cancelLatency.observe(Math.max(0, t.at - from) / 1000);
      cancelAt = null;
    }
    const last = view.history.at(-1);
    if (last !== undefined) seen.historyAt = Math.max(seen.historyAt, last.at);
    return seen;
  }
}
