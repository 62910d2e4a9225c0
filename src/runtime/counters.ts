import type { Redis } from 'ioredis';
import type { AttemptRecord, SessionContext } from '../../machines/types.ts';
import type { Keys } from './keys.ts';
import { lifecycleKeys } from './lifecycle/keys.ts';
import { script } from './redis/scripts.ts';

/**
 * Attempts and retries, counted where they happen: the worker driving a session adds to the
 * session's own `counters` hash in the same fenced write as the snapshot that records the attempt's
 * end (exactly once: a write sent again after it landed writes nothing; a stale holder writes
 * nothing). The fleet-wide totals (`{<prefix>}:counters`) are these per-session counters folded in
 * by FOLD, which remembers per session what it already added (`{<prefix>}:counters-folded`), so a
 * fold may run any number of times, from any process, with a stale read, and adds each increment once.
 * `serve`'s metrics fold the sessions that changed since their last refresh and report the totals.
 *
 * Fields: `attempts|<outcome>|<category>` (category `none` unless failed or interrupted),
 * `retries|<category>` (a failed attempt followed by a backoff) and `walls|<free|counted>` (an
 * attempt that ended on a quota wall, the session parked until the reset).
 */

export function attemptFields(a: AttemptRecord): string[] {
  if (a.outcome === null) return [];
  const category = a.outcome === 'failed' || a.outcome === 'interrupted' ? (a.category ?? 'unknown') : 'none';
  const fields = [`attempts|${a.outcome}|${category}`];
  if (a.delayMs !== null) fields.push(`retries|${a.category ?? 'unknown'}`);
  if (a.quotaWall !== undefined) fields.push(`walls|${a.quotaWall}`);
  return fields;
}

/** The fleet counter field of requests attempts' egress proxies refused (added to the totals directly: a refusal is not part of a session's fenced state). */
export function egressField(reason: string): string {
  return `egress|${reason}`;
}

/** The fleet counter field of webhook deliveries by outcome (webhooks/outbox.ts), added to the totals directly. */
export function webhookField(outcome: 'delivered' | 'failed' | 'refused' | 'dead'): string {
  return `webhooks|${outcome}`;
}

/**
 * The fleet counter field of a prompt stored with a `whenBusy` other than `enqueue` (added to the totals directly,
 * after the prompt is stored): `effect` `interrupted` when it asked the running turn to stop, `steered` when it
 * went into the running turn as a pending steer, `queued` when the session was not busy or nothing ran to stop.
 * A rejected prompt writes nothing, this counter included.
 */
export function whenBusyField(strategy: string, effect: 'interrupted' | 'steered' | 'queued'): string {
  return `whenBusy|${strategy}|${effect}`;
}

/** The fleet counter field of a schedule's firing, by its outcome (schedules/fire.ts; added to the totals directly). */
export function scheduleFiringField(outcome: string): string {
  return `schedule|${outcome}`;
}

/** The buckets (seconds) of the steer latency histogram (sessiond_steer_latency_seconds). */
export const STEER_LATENCY_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300] as const;

/**
 * The session counter field of one delivered steer's latency (accepted → delivered): `steerLatency|<le>`, the
 * smallest bucket bound it fits (`+Inf` past the last). Counted in the same fenced write as the delivery, so once;
 * the metrics observe each at its bucket's bound (a histogram's buckets exact, its sum approximate).
 */
export function steerLatencyField(ms: number): string {
  const seconds = Math.max(0, ms) / 1000;
  const le = STEER_LATENCY_BUCKETS.find((bound) => seconds <= bound);
  return `steerLatency|${le === undefined ? '+Inf' : String(le)}`;
}

/** A parsed counter field (null: not one of ours). */
export function parseField(
  field: string,
):
  | { kind: 'attempts'; outcome: string; category: string }
  | { kind: 'retries'; category: string }
  | { kind: 'walls'; attempts: string }
  | { kind: 'egress'; reason: string }
  | { kind: 'webhooks'; outcome: string }
  | { kind: 'whenBusy'; strategy: string; effect: string }
  | { kind: 'schedule'; outcome: string }
  | { kind: 'steerLatency'; seconds: number }
  | null {
  const parts = field.split('|');
  if (parts[0] === 'webhooks' && parts.length === 2) return { kind: 'webhooks', outcome: parts[1] ?? '' };
  if (parts[0] === 'schedule' && parts.length === 2) return { kind: 'schedule', outcome: parts[1] ?? '' };
  if (parts[0] === 'steerLatency' && parts.length === 2) {
    const last = STEER_LATENCY_BUCKETS[STEER_LATENCY_BUCKETS.length - 1] ?? 300;
    const seconds = parts[1] === '+Inf' ? last * 2 : Number(parts[1]);
    return Number.isFinite(seconds) ? { kind: 'steerLatency', seconds } : null;
  }
  if (parts[0] === 'whenBusy' && parts.length === 3)
    return { kind: 'whenBusy', strategy: parts[1] ?? '', effect: parts[2] ?? '' };
  if (parts[0] === 'egress' && parts.length === 2) return { kind: 'egress', reason: parts[1] ?? '' };
  if (parts[0] === 'walls' && parts.length === 2) return { kind: 'walls', attempts: parts[1] ?? '' };
  if (parts[0] === 'attempts' && parts.length === 3)
    return { kind: 'attempts', outcome: parts[1] ?? '', category: parts[2] ?? '' };
  if (parts[0] === 'retries' && parts.length === 2) return { kind: 'retries', category: parts[1] ?? '' };
  return null;
}

/**
 * Which attempts of a session have been counted: everything up to (turn, attempt). Started from
 * the snapshot a holder loads (whatever had ended then was counted by the holder that wrote it).
 */
export class AttemptTally {
  #turn: number;
  #attempt: number;

  constructor(context: SessionContext | null) {
    const turn = context?.turn ?? null;
    this.#turn = turn?.index ?? context?.turnIndex ?? 0;
    this.#attempt =
      turn === null ? 0 : Math.max(0, ...turn.attempts.filter((a) => a.outcome !== null).map((a) => a.attempt));
  }

  /** The counter fields of the attempts that ended since the last call (each attempt once). */
  ended(context: SessionContext): string[] {
    const turn = context.turn;
    if (turn === null || turn.index < this.#turn) return [];
    if (turn.index > this.#turn) {
      this.#turn = turn.index;
      this.#attempt = 0;
    }
    const fields: string[] = [];
    for (const a of turn.attempts) {
      if (a.outcome === null || a.attempt <= this.#attempt) continue;
      this.#attempt = a.attempt;
      fields.push(...attemptFields(a));
    }
    return fields;
  }
}

/**
 * KEYS: folded, totals. ARGV: sessionId, then (field, cumulative value) pairs read from the session's
 * counters. Adds to the totals what exceeds what was folded for this session before. → 1 added | 0 nothing new
 */
const FOLD = `
local raw = redis.call('HGET', KEYS[1], ARGV[1])
local seen = {}
if raw then
  local ok, decoded = pcall(cjson.decode, raw)
  if ok and type(decoded) == 'table' then seen = decoded end
end
local added = 0
for i = 2, #ARGV, 2 do
  local value = tonumber(ARGV[i + 1]) or 0
  local before = tonumber(seen[ARGV[i]]) or 0
  if value > before then
    redis.call('HINCRBY', KEYS[2], ARGV[i], value - before)
    seen[ARGV[i]] = value
    added = 1
  end
end
if added == 1 then redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(seen)) end
return added
`;

/** Reads a session's counters (its own slot) and folds them into the fleet totals (the fleet slot). */
export async function foldCounters(
  redis: Redis,
  keys: Keys,
  sessionId: string,
  counters?: Record<string, string>,
): Promise<boolean> {
  const values = counters ?? (await redis.hgetall(keys.session(sessionId, 'counters')));
  const pairs = Object.entries(values).flat();
  if (pairs.length === 0) return false;
  const lk = lifecycleKeys(keys);
  return (
    Number(await script(redis, 'sessiondFoldCounters', FOLD)(2, lk.folded, lk.counters, sessionId, ...pairs)) === 1
  );
}

/** The fleet-wide totals, by field. */
export async function counterTotals(redis: Redis, keys: Keys): Promise<Map<string, number>> {
  const raw = await redis.hgetall(lifecycleKeys(keys).counters);
  return new Map(Object.entries(raw).map(([field, value]) => [field, Number(value)]));
}
