import { COUNT_USAGE } from './usage-script.ts';
import { OUTBOX_APPEND } from '../webhooks/outbox-script.ts';

/**
 * The Lua scripts behind every write to a session. Each touches only one
 * session's keys (one hash tag, so one Cluster slot) and runs atomically; every
 * write made while a session is driven checks the lease token first, so a holder
 * whose lease was taken over (a stale token) writes nothing.
 */

/**
 * KEYS: meta, inbox, active, snapshot, seq, cancel, steers, webhook target, outbox, owed (webhooks/outbox-keys.ts). ARGV: sessionId,
 * now, createJson, promptJson, policyJson|'', newJobId, mustExist ('1': refuse an unknown session), maxQueued (0: no
 * limit), maxLog (0: no limit), retentionMs|'', priority|'', maxLogBytes (0 or absent: no limit; the meta's `logBytes`,
 * counted by WRITE), whenBusy ('' or absent: enqueue), the session's webhook URL ('' none) and its secret. A stored
 * prompt with a webhook sets it (replacing the session's); a new session without one drops a target left by a
 * deleted session of the same id (the target outlives its session for its `session.deleted`). Either way the
 * events waiting keep the webhook they were recorded for (or none): their `owed` entry, unless they have one.
 * → {turn, created, jobId|'', priority (the session's, '' when none), shard (its fleet-index shard, '' for 0),
 *   interrupted (the turn whose cancel this prompt asked for, '' when none), active (the session's activation job id),
 *   steered (1: whenBusy "steer" found a turn in progress: the prompt went to the session's pending steers, not its
 *   inbox, and `turn` is the turn it steers)}
 *   | {-1} unknown session (mustExist) | {-2} being deleted
 *   | {-3, limit, queued} too many prompts waiting | {-4, limit, stored} message log full | {-5, limit, bytes} its bytes full
 *   | {-6, state, waiting} busy, and whenBusy is "reject".
 *   Refused: nothing written.
 */
export const ENQUEUE = `
local created = 0
-- Called once nothing can refuse the prompt any more.
local function setWebhook()
  local hook = ARGV[14] or ''
  if created == 1 or hook ~= '' then
    local old = redis.call('HMGET', KEYS[8], 'url', 'secret')
    local owed = 'none'
    if old[1] and old[2] then owed = cjson.encode({ url = old[1], secret = old[2] }) end
    for _, id in ipairs(redis.call('HKEYS', KEYS[9])) do redis.call('HSETNX', KEYS[10], id, owed) end
    redis.call('DEL', KEYS[8])
  end
  if hook ~= '' then
    redis.call('HSET', KEYS[8], 'url', hook, 'secret', ARGV[15])
    redis.call('HSET', KEYS[1], 'webhook', hook)
  end
end
local QUIESCENT = { idle = true, completed = true, failed = true, cancelled = true }
local state, taken, inTurn = 'queued', 0, false
if redis.call('EXISTS', KEYS[1]) == 0 then
  if ARGV[7] == '1' then return {-1} end
  local fields = cjson.decode(ARGV[3])
  redis.call('HSET', KEYS[1], 'sessionId', ARGV[1], 'createdAt', ARGV[2], 'updatedAt', ARGV[2], 'state', 'queued', 'prompts', 0)
  for k, v in pairs(fields) do redis.call('HSET', KEYS[1], k, v) end
  created = 1
else
  if redis.call('HEXISTS', KEYS[1], 'deleting') == 1 then return {-2} end
  local maxQueued = tonumber(ARGV[8])
  -- Waiting = enqueued − taken into a turn (the snapshot's turnIndex; the turn running is not waiting).
  -- The snapshot is read only when something depends on it (a queue limit, a whenBusy other than enqueue).
  local raw = (maxQueued > 0 or (ARGV[13] ~= '' and ARGV[13] ~= 'enqueue')) and redis.call('GET', KEYS[4])
  if raw then
    local ok, decoded = pcall(cjson.decode, raw)
    if ok and type(decoded) == 'table' and type(decoded.snapshot) == 'table' and type(decoded.snapshot.context) == 'table' then
      taken = tonumber(decoded.snapshot.context.turnIndex) or 0
      if type(decoded.snapshot.value) == 'string' then state = decoded.snapshot.value end
    end
  end
  local waiting = tonumber(redis.call('HGET', KEYS[1], 'prompts') or '0') - taken
  inTurn = state ~= 'queued' and not QUIESCENT[state]
  -- whenBusy "reject": refused, nothing written, when a turn is in progress or prompts wait.
  if ARGV[13] == 'reject' and (inTurn or waiting > 0) then return {-6, state, waiting} end
  if maxQueued > 0 and waiting >= maxQueued then return {-3, maxQueued, waiting} end
  local maxLog = tonumber(ARGV[9])
  local stored = tonumber(redis.call('GET', KEYS[5]) or '0')
  if maxLog > 0 and stored >= maxLog then return {-4, maxLog, stored} end
  local maxLogBytes = tonumber(ARGV[12] or '0') or 0
  local bytes = tonumber(redis.call('HGET', KEYS[1], 'logBytes') or '0')
  if maxLogBytes > 0 and bytes >= maxLogBytes then return {-5, maxLogBytes, bytes} end
end
-- whenBusy "steer" with a turn in progress: the prompt joins the pending steers, in order, for that turn (no new
-- turn). The holder hands them to the running attempt; what is left when the turn ends becomes the next turns.
if ARGV[13] == 'steer' and inTurn then
  local maxQueued = tonumber(ARGV[8])
  local pending = redis.call('LLEN', KEYS[7])
  if maxQueued > 0 and pending >= maxQueued then return {-3, maxQueued, pending} end
  setWebhook()
  redis.call('RPUSH', KEYS[7], ARGV[4])
  local active = redis.call('GET', KEYS[3])
  local jobId = ''
  if not active then
    redis.call('SET', KEYS[3], ARGV[6])
    jobId = ARGV[6]
    active = ARGV[6]
  end
  return {taken, 0, jobId, redis.call('HGET', KEYS[1], 'priority') or '', redis.call('HGET', KEYS[1], 'shard') or '', '', active, 1}
end
setWebhook()
if ARGV[5] ~= '' then redis.call('HSET', KEYS[1], 'policy', ARGV[5]) end
if ARGV[10] ~= '' then redis.call('HSET', KEYS[1], 'retention', ARGV[10]) end
if ARGV[11] ~= nil and ARGV[11] ~= '' then redis.call('HSET', KEYS[1], 'priority', ARGV[11]) end
local turn = redis.call('HINCRBY', KEYS[1], 'prompts', 1)
redis.call('RPUSH', KEYS[2], ARGV[4])
-- whenBusy "interrupt"/"rollback": the turn in progress is cancelled (reason "interrupted"), that turn only: the holder
-- drops the request if another turn runs by then. A cancel already pending cancels it anyway and is kept.
local interrupted = ''
if (ARGV[13] == 'interrupt' or ARGV[13] == 'rollback') and inTurn and redis.call('EXISTS', KEYS[6]) == 0 then
  redis.call('SET', KEYS[6], cjson.encode({ reason = 'interrupted', at = tonumber(ARGV[2]), turn = taken, rollback = ARGV[13] == 'rollback' }))
  interrupted = tostring(taken)
end
local jobId = ''
local active = redis.call('GET', KEYS[3])
if not active then
  redis.call('SET', KEYS[3], ARGV[6])
  jobId = ARGV[6]
  active = ARGV[6]
end
return {turn, created, jobId, redis.call('HGET', KEYS[1], 'priority') or '', redis.call('HGET', KEYS[1], 'shard') or '', interrupted, active, 0}
`;

/**
 * KEYS: lease, fence, meta, snapshot, inbox, cancel. ARGV: workerId, ttlMs.
 * → {1, fence, token, metaFlat, snapshot|false, inbox, cancel|false} (the lease, and what the holder
 *   needs to start, in the same round trip) | {0, pttl, holder} | {-1} (no such session, or one being deleted)
 */
export const ACQUIRE = `
if redis.call('EXISTS', KEYS[3]) == 0 or redis.call('HEXISTS', KEYS[3], 'deleting') == 1 then return {-1} end
local holder = redis.call('GET', KEYS[1])
if holder then return {0, redis.call('PTTL', KEYS[1]), holder} end
local fence = redis.call('INCR', KEYS[2])
local token = ARGV[1] .. '#' .. fence
redis.call('SET', KEYS[1], token, 'PX', ARGV[2])
return {1, fence, token, redis.call('HGETALL', KEYS[3]), redis.call('GET', KEYS[4]), redis.call('LRANGE', KEYS[5], 0, -1), redis.call('GET', KEYS[6])}
`;

/** KEYS: lease. ARGV: token, ttlMs. → 1 renewed | 0 lost */
export const RENEW = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`;

/**
 * KEYS: lease, snapshot, log, seq, history, inbox, meta, cancel, agent, active, counters, outbox, outbox due, steers.
 * ARGV: token, snapshotJson|'', inboxTrim, clearCancel '0'|'1', state|'', now,
 *       historyCount, agentCount, messageCount, writeId|'' (the holder's number for this batch),
 *       release ''|'idle'|'keep', counterCount, then history JSONs, then agent (field, value) pairs,
 *       then messages as (turn, attempt, type, contentJson) quadruples, then counter (field, increment) pairs
 *       (attempts and retries counted where they happen: in the write that records them, so exactly once),
 *       then the usage records' JSON array or '' (counted in the meta, see usage-script.ts), then the turn's
 *       trace context or '', then the webhook events (see webhooks/outbox-script.ts: their count, the
 *       session's cap, then (id, body) pairs; KEYS 12-13 the session's outbox and its due set), then the
 *       pending steers this batch delivered (their stored JSON, each removed from `steers`, KEYS 14, in the
 *       same call as the `prompt.steered` message that says so: exactly once).
 * → {1, lastSeq, released, retention, shard} | {-1} (stale token: nothing written); retention: the session's own
 *   retention (ms, '' for the deployment's), when it was released idle (it finished); shard: its fleet-index shard ('' for 0)
 *
 * A batch whose reply was lost may be sent again (ioredis re-sends unanswered commands after a
 * reconnect; the writer re-sends a batch whose call failed): the meta's `write` field holds the
 * token and number of the last batch applied, and a batch carrying them again writes nothing.
 *
 * With a release mode the lease is given back in the same call, after the batch is written:
 * 'idle' (the session is done: end its activation too, unless prompts or a cancel arrived
 * meanwhile) or 'keep' (give the lease up but keep the activation, e.g. a long backoff).
 * released: 1 released | 0 prompts, a cancel or steers are waiting (batch written, still held) | -1 not asked.
 * Steers still pending when the turn is over are the holder's to make the next turns (STEERS_TO_TURNS).
 * A cancel that arrived while the lease was held was told to the holder only (CANCEL made no
 * activation for it): the holder must handle it before letting go, or it would stay behind and
 * cancel whatever prompt comes next.
 */
export const WRITE = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {-1} end
local h = tonumber(ARGV[7])
local a = tonumber(ARGV[8])
local m = tonumber(ARGV[9])
local lastSeq = tonumber(redis.call('GET', KEYS[4]) or '0')
local writeId = ARGV[10] ~= '' and (ARGV[1] .. '/' .. ARGV[10]) or false
-- A batch sent again after its reply was lost already landed: do not write it twice.
if not (writeId and redis.call('HGET', KEYS[7], 'write') == writeId) then
  if writeId then redis.call('HSET', KEYS[7], 'write', writeId) end
  local i = 13
  for _ = 1, h do
    redis.call('RPUSH', KEYS[5], ARGV[i])
    i = i + 1
  end
  if h > 0 then redis.call('LTRIM', KEYS[5], -1000, -1) end
  for _ = 1, a do
    redis.call('HSET', KEYS[9], ARGV[i], ARGV[i + 1])
    i = i + 2
  end
  local logBytes = 0
  for _ = 1, m do
    lastSeq = lastSeq + 1
    redis.call('XADD', KEYS[3], lastSeq .. '-0', 'seq', lastSeq, 'turn', ARGV[i], 'attempt', ARGV[i + 1], 'type', ARGV[i + 2], 'content', ARGV[i + 3])
    logBytes = logBytes + #ARGV[i + 3]
    i = i + 4
  end
  -- The log's size in bytes of content (maxLogBytes): kept beside its count (the seq).
  if logBytes > 0 then redis.call('HINCRBY', KEYS[7], 'logBytes', logBytes) end
  for _ = 1, tonumber(ARGV[12]) do
    redis.call('HINCRBY', KEYS[11], ARGV[i], ARGV[i + 1])
    i = i + 2
  end
  if m > 0 then redis.call('SET', KEYS[4], lastSeq) end
${COUNT_USAGE}
${OUTBOX_APPEND}
  if ARGV[2] ~= '' then redis.call('SET', KEYS[2], ARGV[2]) end
  for j = i + 4 + 2 * outboxCount, #ARGV do redis.call('LREM', KEYS[14], 1, ARGV[j]) end
  local trim = tonumber(ARGV[3])
  if trim > 0 then redis.call('LTRIM', KEYS[6], trim, -1) end
  if ARGV[4] == '1' then redis.call('DEL', KEYS[8]) end
  if ARGV[5] ~= '' then redis.call('HSET', KEYS[7], 'state', ARGV[5], 'updatedAt', ARGV[6]) end
end
local released = -1
if ARGV[11] ~= '' then
  released = 1
  if ARGV[11] == 'idle' then
    if redis.call('LLEN', KEYS[6]) > 0 or redis.call('EXISTS', KEYS[8]) == 1 or redis.call('EXISTS', KEYS[14]) == 1 then
      released = 0
    else
      redis.call('DEL', KEYS[10])
    end
  end
  if released == 1 then redis.call('DEL', KEYS[1]) end
end
local retention = ''
if released == 1 and ARGV[11] == 'idle' then retention = redis.call('HGET', KEYS[7], 'retention') or '' end
return {1, lastSeq, released, retention, redis.call('HGET', KEYS[7], 'shard') or ''}
`;

/**
 * KEYS: meta, cancel, lease, active. ARGV: cancelJson, newJobId.
 * → {-1} no such session | {1, ''} a worker holds it (tell it over pub/sub) | {2, jobId} an activation
 *   exists (promote it) | {3, newJobId} none exists: one was created
 */
export const CANCEL = `
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1, ''} end
redis.call('SET', KEYS[2], ARGV[1])
if redis.call('EXISTS', KEYS[3]) == 1 then return {1, ''} end
local active = redis.call('GET', KEYS[4])
if active then return {2, active} end
redis.call('SET', KEYS[4], ARGV[2])
return {3, ARGV[2]}
`;

/**
 * The fleet-wide indexes of one index shard (one slot: `{<prefix>}` for shard 0, see keys.ts), kept up to date after the sessions' own writes,
 * for any number of sessions in one call. KEYS: sessions, activations, finished, states, listing
 * version, changed (sessionId → when it last changed; the last hour only), then one sorted set per state. ARGV: the states' names (comma-separated, in the order
 * of their sets), then groups of six: sessionId, created ('1': list it), activation ('add' | 'end': its
 * activation ended at `at`, removed unless a newer one was added since | ''), at (ms),
 * expireAt (ms: it finished and expires then | 'remove': active again | ''), state (its name
 * | 't': only touched | ''; a state without a set is not listed by state).
 * The listing version goes up once per call that changed anything shown in the listing.
 */
export const INDEX = `
local set = {}
local n = 0
for name in string.gmatch(ARGV[1], '[^,]+') do
  n = n + 1
  set[name] = KEYS[6 + n]
end
local changed = false
local latest = 0
for i = 2, #ARGV, 6 do
  local id = ARGV[i]
  local at = ARGV[i + 3]
  local touched = false
  if ARGV[i + 1] == '1' then
    redis.call('ZADD', KEYS[1], at, id)
    touched = true
  end
  local activation = ARGV[i + 2]
  if activation == 'add' then
    redis.call('ZADD', KEYS[2], at, id)
  elseif activation == 'end' then
    local score = redis.call('ZSCORE', KEYS[2], id)
    if score and tonumber(score) <= tonumber(at) then redis.call('ZREM', KEYS[2], id) end
  end
  local expire = ARGV[i + 4]
  if expire == 'remove' then
    redis.call('ZREM', KEYS[3], id)
  elseif expire ~= '' then
    redis.call('ZADD', KEYS[3], expire, id)
  end
  local state = ARGV[i + 5]
  if state == 't' then
    touched = true
  elseif state ~= '' then
    touched = true
    local old = redis.call('HGET', KEYS[4], id)
    if old ~= state and set[state] then
      if old and set[old] then redis.call('ZREM', set[old], id) end
      redis.call('HSET', KEYS[4], id, state)
      local created = redis.call('ZSCORE', KEYS[1], id) or at
      redis.call('ZADD', set[state], created, id)
    end
  end
  if touched then
    changed = true
    redis.call('ZADD', KEYS[6], at, id)
    if tonumber(at) > latest then latest = tonumber(at) end
  end
end
if changed then
  redis.call('INCR', KEYS[5])
  redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', latest - 3600000)
end
return 1
`;

/**
 * The turn is over with steers still pending (accepted as it ended, or never reached a safe point): each becomes
 * the next turn, in order, as a prompt of the inbox would (it takes a turn number), and the log says so with a
 * `prompt.steered { via: "turn" }` message of that turn (attempt 0: before any of its attempts). Fenced.
 * KEYS: lease, steers, inbox, meta, log, seq. ARGV: token, now. → -1 stale | the steers moved.
 */
export const STEERS_TO_TURNS = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
local steers = redis.call('LRANGE', KEYS[2], 0, -1)
if #steers == 0 then return 0 end
redis.call('DEL', KEYS[2])
local lastSeq = tonumber(redis.call('GET', KEYS[6]) or '0')
local bytes = 0
for _, raw in ipairs(steers) do
  local turn = redis.call('HINCRBY', KEYS[4], 'prompts', 1)
  redis.call('RPUSH', KEYS[3], raw)
  local ok, steer = pcall(cjson.decode, raw)
  local id = (ok and type(steer) == 'table' and steer.id) or ''
  local content = cjson.encode({ promptId = id, via = 'turn', at = tonumber(ARGV[2]), turn = turn })
  lastSeq = lastSeq + 1
  redis.call('XADD', KEYS[5], lastSeq .. '-0', 'seq', lastSeq, 'turn', turn, 'attempt', 0, 'type', 'prompt.steered', 'content', content)
  bytes = bytes + #content
end
redis.call('SET', KEYS[6], lastSeq)
redis.call('HINCRBY', KEYS[4], 'logBytes', bytes)
redis.call('HSET', KEYS[4], 'updatedAt', ARGV[2])
return #steers
`;
