/**
 * The Lua scripts of the data lifecycle. A session is removed in fenced, restartable steps:
 * MARK (its meta says `deleting`: no prompt is taken and no worker activates it any more),
 * then, once nobody holds it, PURGE (every key of the session, in one call: the whole session
 * or nothing), then the fleet-wide entries (FORGET). Each step may run again after a crash.
 */

/**
 * KEYS: meta, inbox, lease, cancel, active. ARGV: mode ('force' | 'finished' | 'expire'), now,
 * default retention ms (expire mode), quiescent states (comma-separated: QUIESCENT_STATES of machines/states.ts).
 * → {0} no such session | {1, activeJobId|'', holder|'', createdAt, deletingSince, shard|''} marked (or already was; shard: its fleet-index shard)
 *   | {-1, state} not finished (finished/expire modes) | {-2, expireAt} not yet expired (0: kept forever)
 */
export const MARK = `
if redis.call('EXISTS', KEYS[1]) == 0 then return {0} end
local since = redis.call('HGET', KEYS[1], 'deleting')
if not since then
  if ARGV[1] ~= 'force' then
    local state = redis.call('HGET', KEYS[1], 'state') or 'queued'
    local quiet = false
    for s in string.gmatch(ARGV[4], '[^,]+') do if s == state then quiet = true end end
    if not quiet or redis.call('LLEN', KEYS[2]) > 0 or redis.call('EXISTS', KEYS[3]) == 1 or redis.call('EXISTS', KEYS[4]) == 1 or redis.call('EXISTS', KEYS[5]) == 1 then
      return {-1, state}
    end
    if ARGV[1] == 'expire' then
      local retention = tonumber(redis.call('HGET', KEYS[1], 'retention') or ARGV[3])
      if retention <= 0 then return {-2, 0} end
      local updated = tonumber(redis.call('HGET', KEYS[1], 'updatedAt') or redis.call('HGET', KEYS[1], 'createdAt') or '0')
      if updated + retention > tonumber(ARGV[2]) then return {-2, updated + retention} end
    end
  end
  since = ARGV[2]
  redis.call('HSET', KEYS[1], 'deleting', since)
end
return {1, redis.call('GET', KEYS[5]) or '', redis.call('GET', KEYS[3]) or '', redis.call('HGET', KEYS[1], 'createdAt') or '', since, redis.call('HGET', KEYS[1], 'shard') or ''}
`;

/**
 * KEYS: every key of the session, meta first and lease second, then the tombstone; then, with a
 * `session.deleted` webhook event, the session's outbox, its due set and its webhook target (webhooks/outbox-keys.ts).
 * ARGV: takeLease ('1': remove it even if held: its holder is fenced out), tombstoneMs (0: none), now,
 * then the event's id ('' none) and body, which starts `{"turn":-1,`: the session's last turn goes there, and how
 * long the session's own webhook target is kept (ms: its `session.deleted` is sent there).
 * The event is recorded in the call that removes the session (and only by the call that finds it):
 * a deletion that happened is reported, exactly once; the outbox is not a session key, so it stays.
 * → 1 removed | 0 still held | -1 the session is not being deleted (a new one under this id): left alone
 */
export const PURGE = `
local event = ARGV[4] ~= nil and ARGV[4] ~= ''
local n = #KEYS
if event then n = n - 3 end
if redis.call('EXISTS', KEYS[1]) == 1 and not redis.call('HGET', KEYS[1], 'deleting') then return -1 end
if ARGV[1] ~= '1' and redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
if event and redis.call('EXISTS', KEYS[1]) == 1 then
  local turn = tonumber(redis.call('HGET', KEYS[1], 'prompts') or '0') or 0
  local body = '{"turn":' .. turn .. ',' .. string.sub(ARGV[5], 12)
  redis.call('HSET', KEYS[n + 1], ARGV[4], body)
  redis.call('ZADD', KEYS[n + 2], ARGV[3], ARGV[4])
  if redis.call('EXISTS', KEYS[n + 3]) == 1 then redis.call('PEXPIRE', KEYS[n + 3], ARGV[6]) end
end
for i = 1, n - 1 do redis.call('UNLINK', KEYS[i]) end
if tonumber(ARGV[2]) > 0 then redis.call('SET', KEYS[n], ARGV[3], 'PX', ARGV[2]) end
return 1
`;

/**
 * The fleet-wide entries of a removed session in its index shard (one slot). KEYS: sessions,
 * activations, finished, states, listing version, changed, then one sorted set per state. ARGV: sessionId,
 * when the removed session was marked ('' unknown).
 * The listing is removed only if it is the removed session's, listed before its mark (a new session
 * under the same id, made after the purge, keeps its own). The caller then drops the `purging` record.
 */
export const FORGET = `
local id = ARGV[1]
local score = redis.call('ZSCORE', KEYS[1], id)
local ours = ARGV[2] == '' or not score or tonumber(score) <= tonumber(ARGV[2])
if ours then
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
  redis.call('ZREM', KEYS[3], id)
  redis.call('HDEL', KEYS[4], id)
  for i = 6, #KEYS do redis.call('ZREM', KEYS[i], id) end
end
redis.call('INCR', KEYS[5])
return ours and 1 or 0
`;
