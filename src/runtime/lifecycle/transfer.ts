import type { Redis } from 'ioredis';
import type { Keys } from '../keys.ts';
import { SESSION_ID_PATTERN } from '../keys.ts';
import { newJobId, type SessionQueue } from '../queue.ts';
import { multiValues, parseEntry, type SessionStore } from '../store/session-store.ts';
import { ArchiveError, ARCHIVED_META, readArchive, writeArchive, type Archive } from './archive.ts';
import { agentOfField, type ArchiveLimits } from './archive-checks.ts';
import { ConflictError } from './errors.ts';
import { forkConversation } from './fork.ts';
import { sessionsKey } from './keys.ts';
import { QUIESCENT_STATES } from '../../../machines/states.ts';
import type { DeploymentPolicy } from '../../policy/index.ts';
import { DEFAULT_RETRY_POLICY, type RetryPolicy } from '../../retry/policy.ts';
import { parkLimitIssues, turnLimitIssue } from '../deployment-policy.ts';
import type { Workspaces } from '../../workspace/types.ts';
import type { WorkspacePointer } from '../session-loop/workspace-attempt.ts';
import { exportedWorkspace, POINTER_FIELD, removeStored, storeWorkspace } from './transfer-workspace.ts';
import { ROLLBACK_FIELD, TURNS_FIELD } from '../workspace-turns.ts';

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

/**
 * KEYS: snapshot, agent (of one session). ARGV: a JSON array of agent session ids.
 * → the first of them this session uses (its snapshot resumes it, or its agent state holds it), else false.
 */
const USES_AGENT_SESSION = `
local ids = cjson.decode(ARGV[1])
local raw = redis.call('GET', KEYS[1])
if raw then
  local ok, value = pcall(cjson.decode, raw)
  if ok and type(value) == 'table' and type(value.snapshot) == 'table' and type(value.snapshot.context) == 'table' then
    local current = value.snapshot.context.agentSessionId
    for _, id in ipairs(ids) do if current == id then return id end end
  end
end
for _, field in ipairs(redis.call('HKEYS', KEYS[2])) do
  for _, id in ipairs(ids) do if string.sub(field, -(#id + 1)) == ':' .. id then return id end end
end
return false
`;

/** Sessions read per round trip when looking for an agent session id in use. */
const SCAN_BATCH = 500;

/**
 * The first of `ids` another session of this deployment already uses (its snapshot resumes it, or
 * its stored agent state holds it), else null: every session of the listing is looked at, one
 * round trip per SCAN_BATCH sessions. An import is rare; sharing an agent conversation is not an option.
 */
async function agentSessionInUse(
  store: SessionStore,
  queue: SessionQueue,
  ids: readonly string[],
): Promise<string | null> {
  if (ids.length === 0) return null;
  const redis = store.redis;
  if (!('sessiondUsesAgentSession' in redis))
    redis.defineCommand('sessiondUsesAgentSession', { numberOfKeys: 2, lua: USES_AGENT_SESSION });
  const arg = JSON.stringify(ids);
  const shards = await queue.fleetShards();
  for (let shard = 0; shard < shards; shard += 1) {
    const listing = sessionsKey(store.keys, shard);
    for (let start = 0; ; start += SCAN_BATCH) {
      const sessions = await redis.zrange(listing, start, start + SCAN_BATCH - 1);
      if (sessions.length === 0) break;
      const pipeline = redis.pipeline() as unknown as Record<string, (...args: string[]) => unknown> & {
        exec(): Promise<Array<[Error | null, unknown]> | null>;
      };
      for (const id of sessions)
        (pipeline.sessiondUsesAgentSession as (...args: string[]) => unknown).call(
          pipeline,
          store.key(id, 'snapshot'),
          store.key(id, 'agent'),
          arg,
        );
      for (const [error, used] of (await pipeline.exec()) ?? []) {
        if (error !== null) throw error;
        if (typeof used === 'string') return used;
      }
      if (sessions.length < SCAN_BATCH) break;
    }
  }
  return null;
}

/**
 * An imported retry policy (complete: the schema filled it, archive-checks.ts) against the deployment's
 * bounds, as a caller's policy is checked: a field the caller named above the deployment's maximum is
 * refused. A stored policy carries every field, so one at its default counts as not named: the worker
 * puts the deployment's bound over it, as for a caller who named none.
 */
function policyBoundsIssue(
  policy: RetryPolicy,
  deployment: Pick<DeploymentPolicy, 'maxTurnMs' | 'maxParkMs'>,
): string | null {
  const named: Record<string, unknown> = {};
  if (policy.maxTurnMs !== DEFAULT_RETRY_POLICY.maxTurnMs) named.maxTurnMs = policy.maxTurnMs;
  if (policy.maxParkMs !== DEFAULT_RETRY_POLICY.maxParkMs) named.maxParkMs = policy.maxParkMs;
  const issue = turnLimitIssue(named, deployment, 'maxTurnMs') ?? parkLimitIssues(named, deployment, '')[0] ?? null;
  return issue === null ? null : `${issue.field}: ${issue.message}`;
}

/**
 * Reads the whole session in one MULTI (one slot: a consistent picture) as an archive; null for an unknown id.
 * A session with a workspace pointer carries the bundle of the pointer's snapshot (snapshots do not
 * change once made), read through `workspaces`; without them such a session is not exported (ConflictError):
 * its archive would lose its files. Its turn points are not carried (they name the source's snapshots).
 */
export async function exportSession(
  redis: Redis,
  keys: Keys,
  sessionId: string,
  workspaces: Workspaces | null = null,
): Promise<string | null> {
  const read = await readSession(redis, keys, sessionId);
  if (read === null) return null;
  if (read.pointer === null) return writeArchive(read.archive);
  return writeArchive({ ...read.archive, workspace: await exportedWorkspace(read.pointer, sessionId, workspaces) });
}

/**
 * The whole session, read in one MULTI, as an archive's content (not checked: what export writes)
 * without its workspace, and its workspace pointer as stored (null: none); null for an unknown id.
 * The pointer and the turn points are not agent lines: the pointer travels in the workspace line.
 */
export async function readSession(
  redis: Redis,
  keys: Keys,
  sessionId: string,
): Promise<{ archive: Archive; pointer: string | null } | null> {
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
  const {
    [POINTER_FIELD]: pointer,
    [TURNS_FIELD]: _turns,
    [ROLLBACK_FIELD]: _rollback,
    ...agent
  } = value(4) as Record<string, string>;
  const archive: Archive = {
    sessionId,
    exportedAt: Date.now(),
    meta: Object.fromEntries(ARCHIVED_META.filter((f) => meta[f] !== undefined).map((f) => [f, meta[f] as string])),
    snapshot: snapshot === null ? null : (JSON.parse(snapshot) as Archive['snapshot']),
    history: (value(2) as string[]).map((raw) => JSON.parse(raw) as unknown),
    messages: (value(3) as Array<[string, string[]]>).map(([, fields]) => parseEntry(fields)),
    agent: Object.entries(agent),
    // Tombstones of removed prompts are not prompts (see queued-prompts.ts).
    inbox: (value(5) as string[])
      .map((raw) => JSON.parse(raw) as Archive['inbox'][number] & { removed?: boolean })
      .filter((p) => p.removed !== true),
  };
  return { archive, pointer: pointer ?? null };
}

/** What an import is checked against: the deployment's policy (its bounds on a retry policy) and its archive size limits. */
export interface ImportOptions {
  /** Import it under this id (default: the archive's own). */
  as?: string;
  deployment?: Pick<DeploymentPolicy, 'maxTurnMs' | 'maxParkMs'>;
  limits?: ArchiveLimits;
  /** The deployment's workspaces (null or absent: none configured; an archive that carries a workspace is refused). */
  workspaces?: Workspaces | null;
  /** More fields of the new session's agent state, given its agent session id (a fork at a turn: its workspace pointer). */
  extraAgent?: (agentSessionId: string | null) => Array<[string, string]>;
  /** More meta fields of the new session, which an archive does not carry (a fork: its source's tenant). */
  extraMeta?: Record<string, string>;
}

/**
 * Restores an archive as session `as` (default: its own id) — another prefix or another Redis.
 * Contract: the whole archive is checked first (ArchiveError naming the line), every field as a
 * caller's would be (archive.ts, archive-checks.ts, and the retry policy against `deployment`), then
 * written in one script call, so a refused import writes nothing; an existing session is never
 * overwritten (ConflictError). A session with prompts waiting or a turn cut short gets an activation job.
 * The imported session's agent conversation is always its own: under a new id (`as` other than the
 * archive's), or when another session of this deployment already uses one of its agent session ids,
 * it gets an agent conversation of its own (fork.ts); nothing of another session is ever reached.
 * An archive's workspace is stored as the new session's (its pointer rewritten to the stored snapshot and
 * to the conversation the session gets) just before the session is written; when the session is not
 * written, what was stored goes again: no half-imported session, no snapshots of no session.
 */
export async function importSession(
  store: SessionStore,
  queue: SessionQueue,
  text: string,
  options: ImportOptions = {},
): Promise<ImportResult> {
  const archive = readArchive(text, options.limits);
  const sessionId = options.as ?? archive.sessionId;
  if (!SESSION_ID_PATTERN.test(sessionId))
    throw new ArchiveError(
      `--as: a session id must be 1-100 letters, digits or _.- (got ${JSON.stringify(sessionId)})`,
    );
  if (archive.meta.policy !== undefined && options.deployment !== undefined) {
    const issue = policyBoundsIssue(JSON.parse(archive.meta.policy) as RetryPolicy, options.deployment);
    if (issue !== null) throw new ArchiveError(`meta: fields.policy: ${issue}`, 2);
  }
  const workspaces = options.workspaces ?? null;
  if (archive.workspace !== undefined && workspaces === null)
    throw new ArchiveError(
      'workspace: the archive carries a workspace, and workspaces are off in this deployment (workspaces.enabled, SESSIOND_WORKSPACES_ENABLED)',
      archive.workspace.line,
    );
  const context = archive.snapshot?.snapshot.context;
  const copy = sessionId !== archive.sessionId;
  const agentSessionId = typeof context?.agentSessionId === 'string' ? context.agentSessionId : null;
  const pointerSessionId = archive.workspace?.pointer.agentSessionId ?? null;
  const ids = [
    ...new Set([
      ...(agentSessionId === null ? [] : [agentSessionId]),
      ...(pointerSessionId === null ? [] : [pointerSessionId]),
      ...archive.agent.map(([field]) => agentOfField(field).id),
    ]),
  ];
  const shared = !copy && (await agentSessionInUse(store, queue, ids)) !== null;
  const fork =
    copy || shared
      ? forkConversation(agentSessionId, archive.agent)
      : { agentSessionId, agent: archive.agent, conversation: 'kept' as const };
  const agent = [...fork.agent, ...(options.extraAgent?.(fork.agentSessionId) ?? [])];
  // The conversation recorded with the files: the same one, its fork, or none (the next turn starts one).
  const pointer = archive.workspace?.pointer;
  const pointerConversation =
    pointer === undefined || fork.conversation === 'kept' || pointer.agentSessionId === null
      ? (pointer?.agentSessionId ?? null)
      : pointer.agentSessionId === agentSessionId
        ? fork.agentSessionId
        : null;
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
  const exists = async (): Promise<boolean> => (await redis.exists(k('meta'))) === 1;
  if (await exists())
    throw new ConflictError(
      `session "${sessionId}" already exists: import it under another id (--as), or delete it first; nothing was written`,
    );
  let stored: Array<[string, string]> = [];
  if (archive.workspace !== undefined && pointer !== undefined && workspaces !== null) {
    const snapshotId = await storeWorkspace(
      workspaces,
      store,
      sessionId,
      archive.workspace.bundle,
      archive.workspace.line,
    );
    const rewritten: WorkspacePointer = {
      ...pointer,
      snapshot: snapshotId,
      agentSessionId: pointerConversation,
      promptRecorded: pointerConversation === null ? false : pointer.promptRecorded,
    };
    stored = [[POINTER_FIELD, JSON.stringify(rewritten)]];
  }
  let written: number;
  try {
    written = Number(
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
        JSON.stringify({
          ...(shard > 0 ? { ...archive.meta, shard: String(shard) } : archive.meta),
          ...options.extraMeta,
        }),
        snapshot === null ? '' : JSON.stringify(snapshot),
        jobId,
        now,
        archive.history.length,
        archive.messages.length,
        agent.length + stored.length,
        archive.inbox.length,
        ...archive.history.map((e) => JSON.stringify(e)),
        ...archive.messages.flatMap((m) => [m.seq, m.turn, m.attempt, m.type, JSON.stringify(m.content ?? null)]),
        ...agent.flat(),
        ...stored.flat(),
        ...archive.inbox.map((p) => JSON.stringify(p)),
      ),
    );
  } catch (error) {
    // The script writes all or nothing: unless the session is there (its reply lost), the workspace goes too.
    // A Redis that cannot say counts as "there": the session's snapshots are never taken from under it.
    if (stored.length > 0 && workspaces !== null && !(await exists().catch(() => true)))
      await removeStored(workspaces, sessionId, error);
    throw error;
  }
  // Created since the check above by another import or enqueue: the snapshots stored went into that
  // session's index, which its deletion removes; removing them now could take that session's own.
  if (written === 0)
    throw new ConflictError(
      `session "${sessionId}" already exists: import it under another id (--as), or delete it first; nothing was written`,
    );
  const retention = archive.meta.retention === undefined ? store.retentionMs : Number(archive.meta.retention);
  await store.index(
    sessionId,
    {
      created: true,
      state,
      ...(needsActivation
        ? { activation: 'add' as const, expireAt: 'remove' as const }
        : { expireAt: retention > 0 ? now + retention : 'remove' }),
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
  /**
   * The agent conversation: `kept` (the same id), `forked` (a copy under a new id continues it), `new` (the copy's next turn starts one).
   * A copy (`as` a new id), or an archive whose agent session another session of the deployment uses, is never `kept`.
   */
  conversation: 'kept' | 'forked' | 'new';
}
