import { Queue, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Keys } from '../keys.ts';
import { script } from '../redis/scripts.ts';
import type { FiringOutcome, ScheduleDefinition, ScheduleTiming, ScheduleView } from './spec.ts';
import { FIRING_OUTCOMES } from './spec.ts';

/**
 * Where schedules live: every key under one hash tag, `{<prefix>:sch}`, the BullMQ queue of their firings included
 * (`{<prefix>:sch}:schedules:…`), so on a Redis Cluster they are one slot and BullMQ's scripts and ours each touch
 * keys of that slot only. The definitions (`defs`: id → JSON, written once), the state of each (`state`: id →
 * `paused` or `ended:<reason>:<at>`; none: active), the count per owner (`owners`), the runs of each
 * (`runs:<id>`: `last` → JSON, `n|<outcome>` → count; `recent:<id>`: the last RECENT_RUNS firings) and one claim per tick fired (`tick:<id>:<millis>`).
 */
export const SCHEDULE_QUEUE = 'schedules';
export const FIRE_JOB = 'fire';

export interface ScheduleKeys {
  tag: string;
  defs: string;
  state: string;
  owners: string;
  runs(id: string): string;
  recent(id: string): string;
  tick(id: string, tick: number): string;
}

export function scheduleKeys(keys: Keys): ScheduleKeys {
  const tag = `{${keys.prefix}:sch}`;
  return {
    tag,
    defs: `${tag}:defs`,
    state: `${tag}:state`,
    owners: `${tag}:owners`,
    runs: (id) => `${tag}:runs:${id}`,
    recent: (id) => `${tag}:recent:${id}`,
    tick: (id, tick) => `${tag}:tick:${id}:${tick}`,
  };
}

/** The queue of the firings (BullMQ's job schedulers live in it). */
export function scheduleQueue(connection: Redis, keys: Keys): Queue {
  return new Queue(SCHEDULE_QUEUE, { connection, prefix: scheduleKeys(keys).tag });
}

/** How long a tick's claim is kept: far longer than a firing's job can be retried after a stall. */
const TICK_CLAIM_MS = 24 * 3600_000;

/**
 * KEYS: defs, owners. ARGV: id, definition JSON, owner, maxSchedules, maxPerCaller.
 * → {1} | {0, 'exists'} | {0, 'max', count} | {0, 'caller', count}: the limits and the write in one step.
 */
const ADD = `
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return {0, 'exists'} end
local total = redis.call('HLEN', KEYS[1])
if total >= tonumber(ARGV[4]) then return {0, 'max', total} end
local mine = tonumber(redis.call('HGET', KEYS[2], ARGV[3]) or '0')
if mine >= tonumber(ARGV[5]) then return {0, 'caller', mine} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HINCRBY', KEYS[2], ARGV[3], 1)
return {1}
`;

/** KEYS: defs, owners, state, runs, recent runs. ARGV: id, owner. → 1 removed | 0 none. */
const REMOVE = `
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
if tonumber(redis.call('HINCRBY', KEYS[2], ARGV[2], -1)) <= 0 then redis.call('HDEL', KEYS[2], ARGV[2]) end
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('DEL', KEYS[4], KEYS[5])
return 1
`;

/** The firings of a schedule kept for `runs` (newest first). */
export const RECENT_RUNS = 100;

/** KEYS: defs, state. ARGV: id, state ('' clears it). Only a schedule that exists and has not ended. → 1 | 0 none | -1 ended. */
const SET_STATE = `
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
local now = redis.call('HGET', KEYS[2], ARGV[1])
if now and string.sub(now, 1, 6) == 'ended:' then return -1 end
if ARGV[2] == '' then redis.call('HDEL', KEYS[2], ARGV[1]) else redis.call('HSET', KEYS[2], ARGV[1], ARGV[2]) end
return 1
`;

export type ScheduleState =
  { status: 'active' } | { status: 'paused' } | { status: 'ended'; reason: string; at: number };

function parseState(raw: string | null | undefined): ScheduleState {
  if (raw === 'paused') return { status: 'paused' };
  if (raw?.startsWith('ended:') === true) {
    const [, reason = 'unknown', at = '0'] = raw.split(':');
    return { status: 'ended', reason, at: Number(at) };
  }
  return { status: 'active' };
}

/** The schedules' records in Redis and their job schedulers in BullMQ. */
export class ScheduleStore {
  readonly keys: ScheduleKeys;
  readonly #redis: Redis;
  readonly #queue: () => Queue;

  constructor(redis: Redis, keys: Keys, queue: () => Queue) {
    this.#redis = redis;
    this.keys = scheduleKeys(keys);
    this.#queue = queue;
  }

  /** Stores the definition within the limits; → null when stored, else which limit (or the id) stood in the way. */
  async add(
    def: ScheduleDefinition,
    limits: { maxSchedules: number; maxPerCaller: number },
  ): Promise<null | { reason: 'exists' } | { reason: 'max' | 'caller'; count: number }> {
    const reply = (await script(this.#redis, 'sessiondScheduleAdd', ADD)(
      2,
      this.keys.defs,
      this.keys.owners,
      def.id,
      JSON.stringify(def),
      def.owner,
      limits.maxSchedules,
      limits.maxPerCaller,
    )) as [number, string?, number?];
    if (reply[0] === 1) return null;
    if (reply[1] === 'exists') return { reason: 'exists' };
    return { reason: reply[1] === 'caller' ? 'caller' : 'max', count: Number(reply[2] ?? 0) };
  }

  async remove(def: ScheduleDefinition): Promise<boolean> {
    return (
      Number(
        await script(this.#redis, 'sessiondScheduleRemove', REMOVE)(
          5,
          this.keys.defs,
          this.keys.owners,
          this.keys.state,
          this.keys.runs(def.id),
          this.keys.recent(def.id),
          def.id,
          def.owner,
        ),
      ) === 1
    );
  }

  /** → 'ok', 'missing', or 'ended' (an ended schedule is neither paused nor resumed). */
  async setState(id: string, state: 'paused' | 'active' | `ended:${string}`): Promise<'ok' | 'missing' | 'ended'> {
    const reply = Number(
      await script(this.#redis, 'sessiondScheduleState', SET_STATE)(
        2,
        this.keys.defs,
        this.keys.state,
        id,
        state === 'active' ? '' : state,
      ),
    );
    return reply === 1 ? 'ok' : reply === -1 ? 'ended' : 'missing';
  }

  async get(id: string): Promise<{ def: ScheduleDefinition; state: ScheduleState } | null> {
    const [raw, state] = await Promise.all([
      this.#redis.hget(this.keys.defs, id),
      this.#redis.hget(this.keys.state, id),
    ]);
    if (raw === null) return null;
    return { def: JSON.parse(raw) as ScheduleDefinition, state: parseState(state) };
  }

  async all(): Promise<Array<{ def: ScheduleDefinition; state: ScheduleState }>> {
    const [defs, states] = await Promise.all([
      this.#redis.hgetall(this.keys.defs),
      this.#redis.hgetall(this.keys.state),
    ]);
    return Object.entries(defs)
      .map(([id, raw]) => ({ def: JSON.parse(raw) as ScheduleDefinition, state: parseState(states[id]) }))
      .sort((a, b) => a.def.createdAt - b.def.createdAt || a.def.id.localeCompare(b.def.id));
  }

  /** Claims a tick for one firing (fleet-wide, once): false when it was claimed already (a firing's job run again after a stall). */
  async claimTick(id: string, tick: number, by: string): Promise<boolean> {
    return (await this.#redis.set(this.keys.tick(id, tick), by, 'PX', TICK_CLAIM_MS, 'NX')) === 'OK';
  }

  async recordRun(id: string, run: NonNullable<ScheduleView['lastRun']>): Promise<void> {
    await this.#redis
      .multi()
      .hset(this.keys.runs(id), 'last', JSON.stringify(run))
      .hincrby(this.keys.runs(id), `n|${run.outcome}`, 1)
      .lpush(this.keys.recent(id), JSON.stringify(run))
      .ltrim(this.keys.recent(id), 0, RECENT_RUNS - 1)
      .exec();
  }

  /** Its last firings (at most RECENT_RUNS), newest first. */
  async recent(id: string): Promise<Array<NonNullable<ScheduleView['lastRun']>>> {
    const raw = await this.#redis.lrange(this.keys.recent(id), 0, RECENT_RUNS - 1);
    return raw.map((r) => JSON.parse(r) as NonNullable<ScheduleView['lastRun']>);
  }

  async runs(id: string): Promise<{ lastRun: ScheduleView['lastRun']; firings: ScheduleView['firings'] }> {
    const raw = await this.#redis.hgetall(this.keys.runs(id));
    const firings: ScheduleView['firings'] = {};
    for (const outcome of FIRING_OUTCOMES) {
      const n = Number(raw[`n|${outcome}`] ?? 0);
      if (n > 0) firings[outcome] = n;
    }
    return { lastRun: raw.last === undefined ? null : (JSON.parse(raw.last) as ScheduleView['lastRun']), firings };
  }

  /** Its job scheduler, made or replaced: BullMQ adds its next firing's job (delayed) at once. */
  async schedule(def: ScheduleDefinition): Promise<void> {
    await this.#queue().upsertJobScheduler(def.id, repeatOf(def.timing), {
      name: FIRE_JOB,
      data: { scheduleId: def.id },
      // One run per firing job: a firing is not retried (its tick's claim would refuse the rerun anyway).
      opts: { attempts: 1, removeOnComplete: true, removeOnFail: { count: 100 } },
    });
  }

  /** Removes its job scheduler and its next firing's job (a firing that runs now finishes). */
  async unschedule(id: string): Promise<void> {
    await this.#queue().removeJobScheduler(id);
  }

  /** The next run of each job scheduler, by schedule id. */
  async nextRuns(): Promise<Map<string, number>> {
    const schedulers = await this.#queue().getJobSchedulers(0, -1, true);
    const out = new Map<string, number>();
    for (const s of schedulers) if (s.next !== undefined && s.id != null) out.set(s.id, s.next);
    for (const s of schedulers) if (s.next !== undefined && !out.has(s.key)) out.set(s.key, s.next);
    return out;
  }
}

function repeatOf(timing: ScheduleTiming): { pattern: string; tz?: string } | { every: number } {
  return 'everyMs' in timing
    ? { every: timing.everyMs }
    : { pattern: timing.cron, ...(timing.tz === undefined ? {} : { tz: timing.tz }) };
}

/** The tick a firing's job is for: the time it was scheduled at (BullMQ's `prevMillis`; its id `repeat:<id>:<millis>`). */
export function tickOf(job: Job): number {
  const prev = (job.opts as { prevMillis?: unknown }).prevMillis;
  if (typeof prev === 'number' && Number.isFinite(prev)) return prev;
  const last = Number(
    String(job.id ?? '')
      .split(':')
      .pop(),
  );
  return Number.isFinite(last) ? last : job.timestamp;
}

/** The view `schedule list` shows. */
export function viewOf(
  def: ScheduleDefinition,
  state: ScheduleState,
  next: number | undefined,
  runs: { lastRun: ScheduleView['lastRun']; firings: ScheduleView['firings'] },
): ScheduleView {
  return {
    id: def.id,
    ...('everyMs' in def.timing
      ? { everyMs: def.timing.everyMs }
      : { cron: def.timing.cron, ...(def.timing.tz === undefined ? {} : { tz: def.timing.tz }) }),
    sessionId: def.sessionId,
    prompt: def.request.prompt,
    whenBusy: def.request.whenBusy ?? 'enqueue',
    owner: def.owner,
    createdAt: def.createdAt,
    status: state.status,
    ...(state.status === 'ended' ? { endedReason: state.reason } : {}),
    nextRunAt: state.status === 'active' ? (next ?? null) : null,
    lastRun: runs.lastRun,
    firings: runs.firings,
  };
}

export type { FiringOutcome };
