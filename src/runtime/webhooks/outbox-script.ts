/**
 * The part of WRITE (store/scripts.ts) that records webhook events in the session's outbox, in the
 * same fenced, de-duplicated write as the transition they report. Runs with `i` at the usage
 * argument: ARGV[i + 2] the events' count, ARGV[i + 3] the session's cap (events waiting; beyond
 * it an event is dropped and counted in the session's counters as `webhooks|dropped`), then
 * (id, body) pairs. KEYS[12]: hash id → body; KEYS[13]: zset id → when it is due (ms).
 * A body starting `{"seq":-1,` (turn.ended) gets the seq of the session's last stored message,
 * known only here.
 */
export const OUTBOX_APPEND = `
  local outboxCount = tonumber(ARGV[i + 2] or '0') or 0
  if outboxCount > 0 then
    local outboxCap = tonumber(ARGV[i + 3])
    for j = 0, outboxCount - 1 do
      local id = ARGV[i + 4 + 2 * j]
      local body = ARGV[i + 5 + 2 * j]
      if string.sub(body, 1, 10) == '{"seq":-1,' then body = '{"seq":' .. lastSeq .. ',' .. string.sub(body, 11) end
      if redis.call('HLEN', KEYS[12]) >= outboxCap then
        redis.call('HINCRBY', KEYS[11], 'webhooks|dropped', 1)
      else
        redis.call('HSET', KEYS[12], id, body)
        redis.call('ZADD', KEYS[13], ARGV[6], id)
      end
    end
  end`;
