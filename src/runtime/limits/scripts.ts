/**
 * The fleet limits' Lua scripts. Every key of every limit shares the hash tag `{<prefix>:limits}`:
 * one Redis Cluster slot, so one script may check and take all the limits an attempt falls under at
 * once (all or nothing). Per limit key: `held` (zset hold id → lease expiry, ms), `wait` (zset
 * sessionId → order: priority first, then first come), `starts` (zset hold id → start time, the last
 * minute), `cool` (hash until, probe: a shared cooldown), `wexp` (hash sessionId → when a waiter that
 * did not look again is forgotten), `tokens` (hash second → tokens reported by attempts that ended
 * then, the last minute). Fleet-wide: `paused` (set: `*` or limit names), `seq` (the
 * first-come counter), `keys` (hash limit key → limit name, the keys in use).
 */

/** The KEYS of one limit key, in the order the scripts take them. */
export const PER_KEY = 6;

/**
 * KEYS: paused, seq, keys, then PER_KEY per limit key (the first is the fleet's own, without caps).
 * ARGV: now, holdId, sessionId, holdTtlMs, priority, waitTtlMs, pollMs, n, then per key: key, name, maxConcurrent, maxStartsPerMinute, maxTokensPerMinute.
 * → {1} granted (held in every capped key) | {0, name, reason, retryAt} denied: full, rate, tokens, cooldown, paused
 *   (a waiter of each key that denied it, at its place in the order).
 */
export const ACQUIRE = `
local now = tonumber(ARGV[1])
local hold = ARGV[2]
local sid = ARGV[3]
local ttl = tonumber(ARGV[4])
local pri = tonumber(ARGV[5])
local waitTtl = tonumber(ARGV[6])
local poll = tonumber(ARGV[7])
local n = tonumber(ARGV[8])
local fleetPaused = redis.call('SISMEMBER', KEYS[1], '*') == 1
local myScore = nil
for i = 1, n do
  local s = redis.call('ZSCORE', KEYS[3 + (i - 1) * 6 + 2], sid)
  if s then myScore = tonumber(s) break end
end
if not myScore then myScore = (1000 - pri) * 4294967296 + (redis.call('INCR', KEYS[2]) % 4294967296) end
local deny = nil
local blocked = {}
local probe = {}
for i = 1, n do
  local b = 3 + (i - 1) * 6
  local held, wait, starts, cool, wexp, tokens = KEYS[b + 1], KEYS[b + 2], KEYS[b + 3], KEYS[b + 4], KEYS[b + 5], KEYS[b + 6]
  local a = 9 + (i - 1) * 5
  local name = ARGV[a + 1]
  local maxC = tonumber(ARGV[a + 2])
  local maxS = tonumber(ARGV[a + 3])
  local maxT = tonumber(ARGV[a + 4])
  redis.call('ZREMRANGEBYSCORE', held, '-inf', now)
  -- Waiters that stopped looking (their session went away) are forgotten, a few at a time.
  local head = redis.call('ZRANGE', wait, 0, 19)
  for _, w in ipairs(head) do
    local e = tonumber(redis.call('HGET', wexp, w) or '0')
    if e < now and w ~= sid then
      redis.call('ZREM', wait, w)
      redis.call('HDEL', wexp, w)
    end
  end
  local ahead = redis.call('ZCOUNT', wait, '-inf', '(' .. myScore)
  local reason, retry = nil, nil
  if i == 1 then
    if fleetPaused then reason, retry = 'paused', now + poll end
  elseif redis.call('SISMEMBER', KEYS[1], name) == 1 then
    reason, retry = 'paused', now + poll
  else
    local c = redis.call('HMGET', cool, 'until', 'probe')
    local untilMs = tonumber(c[1] or '0')
    if untilMs > now then
      reason, retry = 'cooldown', untilMs
    elseif untilMs > 0 then
      -- The cooldown is over: one probe attempt first, the others wait for its outcome.
      if c[2] and c[2] ~= '' and redis.call('ZSCORE', held, c[2]) then
        reason, retry = 'cooldown', now + poll
      else
        probe[i] = true
      end
    end
    if not reason and maxC > 0 and redis.call('ZCARD', held) + ahead >= maxC then reason, retry = 'full', now + poll end
    if not reason and maxS > 0 then
      redis.call('ZREMRANGEBYSCORE', starts, '-inf', now - 60000)
      if redis.call('ZCARD', starts) + ahead >= maxS then
        local oldest = redis.call('ZRANGE', starts, 0, 0, 'WITHSCORES')
        reason, retry = 'rate', (oldest[2] and tonumber(oldest[2]) + 60000) or (now + poll)
        if retry < now then retry = now end
      end
    end
    if not reason and maxT > 0 then
      -- Tokens reported in the last minute (per second); over the cap, starts wait until enough of them are a minute old.
      local sec = math.floor(now / 1000)
      local flat = redis.call('HGETALL', tokens)
      local buckets, sum = {}, 0
      for j = 1, #flat, 2 do
        local s, t = tonumber(flat[j]), tonumber(flat[j + 1])
        if s <= sec - 60 then
          redis.call('HDEL', tokens, flat[j])
        else
          buckets[#buckets + 1] = {s, t}
          sum = sum + t
        end
      end
      if sum >= maxT then
        table.sort(buckets, function(x, y) return x[1] < y[1] end)
        local left = sum
        retry = now + poll
        for _, bucket in ipairs(buckets) do
          left = left - bucket[2]
          if left < maxT then
            retry = (bucket[1] + 61) * 1000
            break
          end
        end
        reason = 'tokens'
      end
    end
  end
  if reason then
    blocked[#blocked + 1] = i
    if not deny or retry > deny[3] then deny = {name, reason, retry} end
  end
end
if deny then
  for _, i in ipairs(blocked) do
    local b = 3 + (i - 1) * 6
    redis.call('ZADD', KEYS[b + 2], 'NX', myScore, sid)
    redis.call('HSET', KEYS[b + 5], sid, math.max(deny[3], now + poll) + waitTtl)
    redis.call('HSET', KEYS[3], ARGV[9 + (i - 1) * 5], ARGV[9 + (i - 1) * 5 + 1])
  end
  return {0, deny[1], deny[2], tostring(deny[3])}
end
for i = 1, n do
  local b = 3 + (i - 1) * 6
  local a = 9 + (i - 1) * 5
  redis.call('ZREM', KEYS[b + 2], sid)
  redis.call('HDEL', KEYS[b + 5], sid)
  if i > 1 then
    redis.call('ZADD', KEYS[b + 1], now + ttl, hold)
    redis.call('HSET', KEYS[3], ARGV[a], ARGV[a + 1])
    if tonumber(ARGV[a + 3]) > 0 then redis.call('ZADD', KEYS[b + 3], now, hold) end
    if probe[i] then redis.call('HSET', KEYS[b + 4], 'probe', hold) end
  end
end
return {1}
`;

/**
 * KEYS: keys, then PER_KEY per limit key held. ARGV: now, holdId, cooldownUntil (0: none), n, then per key: key, maxConcurrent,
 * maxTokensPerMinute, then the tokens the attempt reported (counted in the `tokens` of each key with a token cap).
 * Gives the hold back; a rate-limited attempt with a Retry-After starts (or lengthens) the key's
 * cooldown; the probe that ends otherwise ends it. → the sessions to wake (the head waiters there is
 * now room for), without duplicates.
 */
export const RELEASE = `
local now = tonumber(ARGV[1])
local hold = ARGV[2]
local coolUntil = tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local used = tonumber(ARGV[5 + n * 3] or '0') or 0
local wake, seen = {}, {}
for i = 1, n do
  local b = 1 + (i - 1) * 6
  local held, wait, starts, cool, wexp, tokens = KEYS[b + 1], KEYS[b + 2], KEYS[b + 3], KEYS[b + 4], KEYS[b + 5], KEYS[b + 6]
  local key = ARGV[5 + (i - 1) * 3]
  local maxC = tonumber(ARGV[6 + (i - 1) * 3])
  local maxT = tonumber(ARGV[7 + (i - 1) * 3])
  if used > 0 and maxT > 0 then
    redis.call('HINCRBY', tokens, tostring(math.floor(now / 1000)), used)
    redis.call('PEXPIRE', tokens, 120000)
  end
  redis.call('ZREM', held, hold)
  redis.call('ZREMRANGEBYSCORE', held, '-inf', now)
  local c = redis.call('HMGET', cool, 'until', 'probe')
  local untilMs = tonumber(c[1] or '0')
  if coolUntil > 0 then
    if coolUntil > untilMs then untilMs = coolUntil end
    redis.call('HSET', cool, 'until', untilMs, 'probe', '')
    redis.call('PEXPIREAT', cool, untilMs + 600000)
  elseif c[2] == hold then
    redis.call('DEL', cool)
    untilMs = 0
  end
  local room = 0
  if untilMs > now then
    room = 0
  elseif untilMs > 0 then
    room = 1
  elseif maxC > 0 then
    room = maxC - redis.call('ZCARD', held)
  else
    room = 1
  end
  if room > 20 then room = 20 end
  if room > 0 then
    for _, w in ipairs(redis.call('ZRANGE', wait, 0, room - 1)) do
      if not seen[w] then
        seen[w] = true
        wake[#wake + 1] = w
      end
    end
  end
  if redis.call('ZCARD', held) == 0 and redis.call('ZCARD', wait) == 0 and redis.call('EXISTS', cool) == 0 and redis.call('EXISTS', tokens) == 0 then
    redis.call('HDEL', KEYS[1], key)
    redis.call('DEL', starts, wexp)
  end
end
return wake
`;

/** KEYS: held per limit key. ARGV: expiry (ms), holdId. → how many were still held. */
export const RENEW = `
local kept = 0
for i = 1, #KEYS do kept = kept + redis.call('ZADD', KEYS[i], 'XX', 'CH', ARGV[1], ARGV[2]) end
return kept
`;

/** KEYS: wait, wexp, paused of one key (first the fleet's). ARGV: sessionId. Forgets a waiter (its session ended or no longer waits here). */
export const FORGET = `
for i = 1, #KEYS, 2 do
  redis.call('ZREM', KEYS[i], ARGV[1])
  redis.call('HDEL', KEYS[i + 1], ARGV[1])
end
return 1
`;

/**
 * KEYS: held, wait, cool, paused of one limit key. ARGV: now, name, maxConcurrent, fleet ('1': the fleet's own key).
 * Drops lapsed holds (a dead worker's) and names the head waiters there is room for now (none while
 * paused or cooling down; one once a cooldown is over, to probe).
 */
export const WAKE = `
local now = tonumber(ARGV[1])
local maxC = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if ARGV[4] == '1' then
  if redis.call('SISMEMBER', KEYS[4], '*') == 1 then return {} end
  return redis.call('ZRANGE', KEYS[2], 0, 199)
end
if redis.call('SISMEMBER', KEYS[4], '*') == 1 or redis.call('SISMEMBER', KEYS[4], ARGV[2]) == 1 then return {} end
local c = redis.call('HMGET', KEYS[3], 'until', 'probe')
local untilMs = tonumber(c[1] or '0')
local room
if untilMs > now then
  return {}
elseif untilMs > 0 then
  if c[2] and c[2] ~= '' and redis.call('ZSCORE', KEYS[1], c[2]) then return {} end
  room = 1
elseif maxC > 0 then
  room = maxC - redis.call('ZCARD', KEYS[1])
else
  room = 1
end
if room <= 0 then return {} end
if room > 50 then room = 50 end
return redis.call('ZRANGE', KEYS[2], 0, room - 1)
`;
