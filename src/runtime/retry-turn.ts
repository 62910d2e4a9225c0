import type { Redis } from 'ioredis';
import type { SessionStore } from './store/session-store.ts';

/**
 * KEYS: meta, inbox, active, snapshot, cancel. ARGV: retryOf (the turn's index), promptJson, newJobId.
 * Puts an operator's retry of the session's failed last turn in its inbox, atomically with the checks:
 * the snapshot's turn is that turn and failed, no prompt waits (prompts enqueued == turns taken, so two
 * retries racing put one in), no cancel is pending.
 * → {turn, jobId} | {-1} unknown | {-2} being deleted | {-3, status, turnIndex} not that failed turn
 *   | {-4, waiting} prompts waiting | {-5} a cancel pending
 */
const RETRY_TURN = `
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1} end
if redis.call('HEXISTS', KEYS[1], 'deleting') == 1 then return {-2} end
local raw = redis.call('GET', KEYS[4])
if not raw then return {-3, 'none', 0} end
local ok, decoded = pcall(cjson.decode, raw)
if not ok or type(decoded) ~= 'table' or type(decoded.snapshot) ~= 'table' or type(decoded.snapshot.context) ~= 'table' then return {-3, 'none', 0} end
local context = decoded.snapshot.context
local turn = context.turn
local taken = tonumber(context.turnIndex) or 0
if type(turn) ~= 'table' or turn.status ~= 'failed' or tonumber(turn.index) ~= tonumber(ARGV[1]) then
  local status = 'none'
  if type(turn) == 'table' then status = tostring(turn.status) end
  return {-3, status, taken}
end
local waiting = tonumber(redis.call('HGET', KEYS[1], 'prompts') or '0') - taken
if waiting > 0 or redis.call('LLEN', KEYS[2]) > 0 then return {-4, waiting} end
if redis.call('EXISTS', KEYS[5]) == 1 then return {-5} end
local index = redis.call('HINCRBY', KEYS[1], 'prompts', 1)
redis.call('RPUSH', KEYS[2], ARGV[2])
local jobId = ''
if redis.call('EXISTS', KEYS[3]) == 0 then
  redis.call('SET', KEYS[3], ARGV[3])
  jobId = ARGV[3]
end
return {index, jobId}
`;

export type RetryTurnResult =
  | { ok: true; turn: number; jobId: string | null }
  | { ok: false; reason: 'unknown_session' | 'deleting' | 'cancel_pending' }
  | { ok: false; reason: 'not_failed'; status: string; turnIndex: number }
  | { ok: false; reason: 'prompts_waiting'; waiting: number };

type ScriptFn = (...args: Array<string | number>) => Promise<unknown>;

/** Puts the retry of turn `retryOf` in the session's inbox if it is still the failed last turn (see RETRY_TURN). */
export async function pushRetry(
  store: SessionStore,
  sessionId: string,
  retryOf: number,
  prompt: object,
  newJobId: string,
): Promise<RetryTurnResult> {
  const redis = store.redis as Redis & Record<string, unknown>;
  if (!('sessiondRetryTurn' in redis)) redis.defineCommand('sessiondRetryTurn', { numberOfKeys: 5, lua: RETRY_TURN });
  const run = (redis.sessiondRetryTurn as ScriptFn).bind(redis);
  const k = (part: Parameters<SessionStore['key']>[1]) => store.key(sessionId, part);
  const r = (await run(
    k('meta'),
    k('inbox'),
    k('active'),
    k('snapshot'),
    k('cancel'),
    retryOf,
    JSON.stringify(prompt),
    newJobId,
  )) as Array<number | string>;
  const code = Number(r[0]);
  if (code === -1) return { ok: false, reason: 'unknown_session' };
  if (code === -2) return { ok: false, reason: 'deleting' };
  if (code === -3) return { ok: false, reason: 'not_failed', status: String(r[1]), turnIndex: Number(r[2]) };
  if (code === -4) return { ok: false, reason: 'prompts_waiting', waiting: Number(r[1]) };
  if (code === -5) return { ok: false, reason: 'cancel_pending' };
  const jobId = String(r[1] ?? '');
  return { ok: true, turn: code, jobId: jobId === '' ? null : jobId };
}
