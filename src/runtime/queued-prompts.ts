import type { SessionStore } from './store/session-store.ts';
import { script } from './redis/scripts.ts';

/**
 * Removing a queued prompt, safe against a worker taking it at the same moment.
 *
 * A prompt waits in the session's inbox (a Redis list) until its holder reads it into the actor's
 * mailbox; the holder trims the inbox later by a count. So an entry is never deleted from the
 * list: it is replaced in place by a tombstone (`removed: true`), which every reader skips and
 * the holder's trim still counts. Decided in one script in the session's slot:
 * - nobody holds the session: no worker can have read the entry (a new holder reads the inbox with
 *   the lease, atomically), so it is removed now; a prompt that a previous holder left in the
 *   snapshot's mailbox (a parked session) is marked `drop`, and the next holder takes it out of the
 *   mailbox before it restores the actor, before any turn can start;
 * - a worker holds it: it may have read the prompt already, so the script marks it `pending` and
 *   the holder decides (removed if it is still in the mailbox or unread, started if its turn began)
 *   and writes the outcome into `unqueue:<id>`.
 * A removed prompt is taken off the `prompts` count, so the turn numbers of the later ones stay true.
 */

/** The meta field of a removal: `pending` (the holder decides), `drop` (decided: out of the mailbox), `removed` / `started` (the holder's outcome). */
export const unqueueField = (promptId: string): string => `unqueue:${promptId}`;

/**
 * KEYS: meta, inbox, lease, snapshot. ARGV: promptId.
 * → {1} removed | {2} asked the holder | {0, 'started'|'unknown'} | {-1} unknown session | {-2} being deleted
 */
const REMOVE_QUEUED = `
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1} end
if redis.call('HEXISTS', KEYS[1], 'deleting') == 1 then return {-2} end
local id = ARGV[1]
local field = 'unqueue:' .. id
local was = redis.call('HGET', KEYS[1], field)
-- Removed already (a second call for the same prompt changes nothing).
if was == 'drop' or was == 'removed' then return {0, 'unknown'} end
if was == 'started' then return {0, 'started'} end
local inInbox = false
local entries = redis.call('LRANGE', KEYS[2], 0, -1)
for i, raw in ipairs(entries) do
  local ok, p = pcall(cjson.decode, raw)
  if ok and type(p) == 'table' and p.id == id and p.removed ~= true then
    redis.call('LSET', KEYS[2], i - 1, cjson.encode({ id = id, removed = true, text = '', enqueuedAt = p.enqueuedAt or 0 }))
    inInbox = true
    break
  end
end
local inMailbox, started = false, false
local raw = redis.call('GET', KEYS[4])
if raw then
  local ok, decoded = pcall(cjson.decode, raw)
  if ok and type(decoded) == 'table' and type(decoded.snapshot) == 'table' and type(decoded.snapshot.context) == 'table' then
    local context = decoded.snapshot.context
    if type(context.mailbox) == 'table' then
      for _, p in ipairs(context.mailbox) do if type(p) == 'table' and p.id == id then inMailbox = true end end
    end
    if type(context.turn) == 'table' and context.turn.promptId == id then started = true end
    if type(context.finishedPromptIds) == 'table' then
      for _, f in ipairs(context.finishedPromptIds) do if f == id then started = true end end
    end
  end
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  if not inInbox and not inMailbox and started then return {0, 'started'} end
  redis.call('HSET', KEYS[1], field, 'pending')
  return {2}
end
-- Nobody holds it. A removal left pending by a holder that let go is decided here too (its entry is a tombstone already).
if inInbox or inMailbox or (was == 'pending' and not started) then
  if inMailbox then redis.call('HSET', KEYS[1], field, 'drop') else redis.call('HDEL', KEYS[1], field) end
  redis.call('HINCRBY', KEYS[1], 'prompts', -1)
  return {1}
end
if was == 'pending' then redis.call('HDEL', KEYS[1], field) end
if started then return {0, 'started'} end
return {0, 'unknown'}
`;

/** KEYS: meta. ARGV: promptId, outcome ('removed' | 'started'). The holder's answer to a pending removal (once). */
const SETTLE_UNQUEUE = `
local field = 'unqueue:' .. ARGV[1]
if redis.call('HGET', KEYS[1], field) ~= 'pending' then return 0 end
redis.call('HSET', KEYS[1], field, ARGV[2])
if ARGV[2] == 'removed' then redis.call('HINCRBY', KEYS[1], 'prompts', -1) end
return 1
`;

export type RemoveQueuedResult = 'removed' | 'asked' | 'started' | 'unknown_prompt' | 'unknown_session' | 'deleting';

export async function removeQueued(
  store: SessionStore,
  sessionId: string,
  promptId: string,
): Promise<RemoveQueuedResult> {
  const k = (part: Parameters<SessionStore['key']>[1]) => store.key(sessionId, part);
  const r = (await script(store.redis, 'sessiondRemoveQueued', REMOVE_QUEUED, 4)(
    k('meta'),
    k('inbox'),
    k('lease'),
    k('snapshot'),
    promptId,
  )) as Array<number | string>;
  const code = Number(r[0]);
  if (code === 1) return 'removed';
  if (code === 2) return 'asked';
  if (code === -1) return 'unknown_session';
  if (code === -2) return 'deleting';
  return r[1] === 'started' ? 'started' : 'unknown_prompt';
}

/** The holder's outcome of a pending removal; true when it was pending. */
export async function settleUnqueue(
  store: SessionStore,
  sessionId: string,
  promptId: string,
  outcome: 'removed' | 'started',
): Promise<boolean> {
  return (
    (await script(
      store.redis,
      'sessiondSettleUnqueue',
      SETTLE_UNQUEUE,
      1,
    )(store.key(sessionId, 'meta'), promptId, outcome)) === 1
  );
}

/** The removals recorded in a session's meta: prompt id → state. */
export function unqueueRequests(meta: Readonly<Record<string, string>>): Map<string, string> {
  const out = new Map<string, string>();
  for (const [field, value] of Object.entries(meta))
    if (field.startsWith('unqueue:')) out.set(field.slice('unqueue:'.length), value);
  return out;
}
