import type { Redis } from 'ioredis';
import type { Keys } from '../keys.ts';
import { SESSION_ID_PATTERN } from '../keys.ts';
import { newJobId, type SessionQueue } from '../queue.ts';
import { multiValues, parseEntry, type SessionStore } from '../store/session-store.ts';
import { ArchiveError, ARCHIVED_META, readArchive, writeArchive, type Archive } from './archive.ts';
import { ConflictError } from './errors.ts';
import { forkConversation } from './fork.ts';
import { QUIESCENT_STATES } from '../../../machines/states.ts';

/**
 * KEYS: meta, snapshot, history, log, seq, agent, inbox, active.
 * ARGV: sessionId, metaJson, snapshot|'', jobId|'' (an activation to create), now, historyCount, messageCount,
 *       agentCount, inboxCount, then history JSONs, messages as (seq, turn, attempt, type, contentJson),
 *       agent (field, value) pairs, inbox prompt JSONs.
 * → 1 written | 0 the session exists (nothing written)
 */
const IMPORT = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local meta = cjson.decode(ARGV[2])
redis.call('HSET', KEYS[1], 'sessionId', ARGV[1], 'updatedAt', ARGV[5])
for k, v in pairs(meta) do if k ~= 'updatedAt' then redis.call('HSET', KEYS[1], k, v) end end
if ARGV[3] ~= '' then redis.call('SET', KEYS[2], ARGV[3]) end
local h, m, a, n = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local i = 10
for _ = 1, h do redis.call('RPUSH', KEYS[3], ARGV[i]); i = i + 1 end
local last = 0
local bytes = 0
for _ = 1, m do
  redis.call('XADD', KEYS[4], ARGV[i] .. '-0', 'seq', ARGV[i], 'turn', ARGV[i + 1], 'attempt', ARGV[i + 2], 'type', ARGV[i + 3], 'content', ARGV[i + 4])
  last = ARGV[i]
  bytes = bytes + #ARGV[i + 4]
  i = i + 5
end
if m > 0 then redis.call('SET', KEYS[5], last) end
-- auth lane (issue 25): the imported log counts against maxLogBytes as a written one does.
if bytes > 0 then redis.call('HSET', KEYS[1], 'logBytes', bytes) end
for _ = 1, a do redis.call('HSET', KEYS[6], ARGV[i], ARGV[i + 1]); i = i + 2 end
for _ = 1, n do redis.call('RPUSH', KEYS[7], ARGV[i]); i = i + 1 end
if ARGV[4] ~= '' then redis.call('SET', KEYS[8], ARGV[4]) end
return 1
`;

type ScriptFn = (...args: Array<string | number>) => Promise<unknown>;

/** Reads the whole session in one MULTI (one slot: a consistent picture) as an archive; null for an unknown id. */
export async function exportSession(redis: Redis, keys: Keys, sessionId: string): Promise<string | null> {
  const k = (part: Parameters<Keys['session']>[1]) => keys.session(sessionId, part);
  const replies = await redis
    .multi()
    .hgetall(k('meta'))
    .get(k('snapshot'))
    .lrange(k('history'), 0, -1)
    .xrange(k('log'), '-', '+')
    .hgetall(k('agent'))
    .lrange(k('inbox'), 0, -1)
    .exec();
  const value = multiValues(replies, sessionId);
  const meta = value(0) as Record<string, string>;
  if (Object.keys(meta).length === 0) return null;
  if (meta.deleting !== undefined) throw new ConflictError(`session "${sessionId}" is being deleted`);
  const snapshot = value(1) as string | null;
  const archive: Archive = {
    sessionId,
    exportedAt: Date.now(),
    meta: Object.fromEntries(ARCHIVED_META.filter((f) => meta[f] !== undefined).map((f) => [f, meta[f] as string])),
    snapshot: snapshot === null ? null : (JSON.parse(snapshot) as Archive['snapshot']),
    history: (value(2) as string[]).map((raw) => JSON.parse(raw) as unknown),
    messages: (value(3) as Array<[string, string[]]>).map(([, fields]) => parseEntry(fields)),
    agent: Object.entries(value(4) as Record<string, string>),
    // Tombstones of removed prompts are not prompts (see queued-prompts.ts).
    inbox: (value(5) as string[]).map((raw) => JSON.parse(raw) as Archive['inbox'][number] & { removed?: boolean }).filter((p) => p.removed !== true),
  };
  return writeArchive(archive);
}

/**
 * Restores an archive as session `as` (default: its own id) — another prefix or another Redis.
 * Contract: the whole archive is checked first (ArchiveError naming the line), then written in one
 * script call, so a refused import writes nothing; an existing session is never overwritten
 * (ConflictError). A session with prompts waiting or a turn cut short gets an activation job.
 * Under a new id (`as` other than the archive's), the copy gets an agent conversation of its own (fork.ts).
 */
export async function importSession(store: SessionStore, queue: SessionQueue, text: string, options: { as?: string } = {}): Promise<ImportResult> {
  const archive = readArchive(text);
  const sessionId = options.as ?? archive.sessionId;
  if (!SESSION_ID_PATTERN.test(sessionId)) throw new ArchiveError(`--as: a session id must be 1-100 letters, digits or _.- (got ${JSON.stringify(sessionId)})`);
  const context = archive.snapshot?.snapshot.context;
  const copy = sessionId !== archive.sessionId;
  const agentSessionId = typeof context?.agentSessionId === 'string' ? context.agentSessionId : null;
  const fork = copy ? forkConversation(agentSessionId, archive.agent) : { agentSessionId, agent: archive.agent, conversation: 'kept' as const };
  const agent = fork.agent;
  const snapshot =
    archive.snapshot === null || context === undefined
      ? null
      : {
          ...archive.snapshot,
          snapshot: {
            ...archive.snapshot.snapshot,
            context: {
              ...context,
              sessionId,
              agentSessionId: fork.agentSessionId,
              agentSessionResumable: fork.conversation === 'new' ? false : context.agentSessionResumable,
            },
          },
        };
  const state = archive.meta.state ?? 'queued';
  const needsActivation = archive.inbox.length > 0 || !(QUIESCENT_STATES as readonly string[]).includes(state);
  const jobId = needsActivation ? newJobId(sessionId) : '';
  const now = Date.now();
  const k = (part: Parameters<Keys['session']>[1]) => store.key(sessionId, part);
  const redis = store.redis;
  const shard = queue.indexShardOf(sessionId);
  if (shard > 0) await queue.knownPartitions();
  if (!('sessiondImport' in redis)) redis.defineCommand('sessiondImport', { numberOfKeys: 8, lua: IMPORT });
  const run = ((redis as unknown as Record<string, ScriptFn>).sessiondImport as ScriptFn).bind(redis);
  const written = Number(
    await run(
      k('meta'),
      k('snapshot'),
      k('history'),
      k('log'),
      k('seq'),
      k('agent'),
      k('inbox'),
      k('active'),
      sessionId,
      // Its fleet-index shard in this deployment (see keys.ts): an archive does not carry one.
      JSON.stringify(shard > 0 ? { ...archive.meta, shard: String(shard) } : archive.meta),
      snapshot === null ? '' : JSON.stringify(snapshot),
      jobId,
      now,
      archive.history.length,
      archive.messages.length,
      agent.length,
      archive.inbox.length,
      ...archive.history.map((e) => JSON.stringify(e)),
      ...archive.messages.flatMap((m) => [m.seq, m.turn, m.attempt, m.type, JSON.stringify(m.content ?? null)]),
      ...agent.flat(),
      ...archive.inbox.map((p) => JSON.stringify(p)),
    ),
  );
  if (written === 0) throw new ConflictError(`session "${sessionId}" already exists: import it under another id (--as), or delete it first; nothing was written`);
  const retention = archive.meta.retention === undefined ? store.retentionMs : Number(archive.meta.retention);
  await store.index(
    sessionId,
    {
      created: true,
      state,
      ...(needsActivation ? { activation: 'add' as const, expireAt: 'remove' as const } : { expireAt: retention > 0 ? now + retention : 'remove' }),
    },
    shard,
  );
  if (needsActivation) await queue.addActivation(sessionId, jobId);
  return { sessionId, messages: archive.messages.length, state, conversation: fork.conversation };
}

export interface ImportResult {
  sessionId: string;
  messages: number;
  state: string;
  /** The agent conversation: `kept` (the same id), `forked` (a copy under a new id continues it), `new` (the copy's next turn starts one). */
  conversation: 'kept' | 'forked' | 'new';
}
