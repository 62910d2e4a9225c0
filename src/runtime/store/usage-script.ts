import { MAX_MODELS } from '../usage/usage.ts';

/**
 * The part of WRITE (scripts.ts) that counts token usage, in the same atomic, fenced and
 * de-duplicated write as the terminal messages it comes from. Runs with `i` at the ARGV after the
 * messages: a JSON array of UsageRecord (usage/usage.ts), or '' / absent for none, then the turn's trace
 * context (JSON, stored as the meta's `trace`) or '' / absent. Updates three
 * fields of the session's meta (KEYS[7]): `usage` (the session's sums), `usageTurn` (the latest
 * turn's sum and each of its attempts') and `usageByModel` (sums per agent and model, at most
 * MAX_MODELS pairs, then `other`).
 */
export const COUNT_USAGE = `
local usageArg = ARGV[i]
if usageArg and usageArg ~= '' then
  local function decoded(field)
    local raw = redis.call('HGET', KEYS[7], field)
    if not raw then return nil end
    local ok, value = pcall(cjson.decode, raw)
    if ok and type(value) == 'table' then return value end
    return nil
  end
  local function add(into, usage)
    for k, v in pairs(usage) do
      if type(v) == 'number' then into[k] = (tonumber(into[k]) or 0) + v end
    end
  end
  local total = decoded('usage') or {}
  local turnU = decoded('usageTurn')
  local models = decoded('usageByModel') or {}
  local modelCount = 0
  for _ in pairs(models) do modelCount = modelCount + 1 end
  for _, r in ipairs(cjson.decode(usageArg)) do
    add(total, r.usage)
    if not turnU or turnU.turn ~= r.turn then turnU = {turn = r.turn, total = {}, attempts = {}} end
    add(turnU.total, r.usage)
    local a = tostring(r.attempt)
    if type(turnU.attempts[a]) ~= 'table' then turnU.attempts[a] = {} end
    add(turnU.attempts[a], r.usage)
    turnU.attempts[a].at = r.at
    turnU.attempts[a].agent = r.agent
    turnU.attempts[a].model = r.model
    local mk = tostring(r.agent) .. '\\t' .. tostring(r.model)
    if not models[mk] then
      if modelCount >= ${MAX_MODELS} then mk = 'other\\tother' end
      if not models[mk] then
        models[mk] = {}
        modelCount = modelCount + 1
      end
    end
    add(models[mk], r.usage)
  end
  redis.call('HSET', KEYS[7], 'usage', cjson.encode(total), 'usageTurn', cjson.encode(turnU), 'usageByModel', cjson.encode(models))
end
local traceArg = ARGV[i + 1]
if traceArg and traceArg ~= '' then redis.call('HSET', KEYS[7], 'trace', traceArg) end
`;
