import { agentDefinition, isAgentName } from '../../agents/registry.ts';
import { ConflictError, InputError, NotFoundError, QuotaError } from '../../errors.ts';
import { WorkspaceInputError, type Workspaces } from '../../workspace/types.ts';
import { SESSION_ID_PATTERN } from '../keys.ts';
import { script } from '../redis/scripts.ts';
import { POINTER_FIELD, type WorkspacePointer } from '../session-loop/workspace-attempt.ts';
import { readSession, importSession, type ImportResult } from '../lifecycle/transfer.ts';
import { writeArchive } from '../lifecycle/archive.ts';
import { parseTurns, takeBackTo, TURNS_FIELD, type TurnPoint } from '../workspace-turns.ts';
import { withOwnerSlot, type SessionOwner } from '../limits/owner-sessions.ts';
import { cancel } from './turns.ts';
import { checkSessionId, type CallerParts } from './parts.ts';

// A workspace session's turns from the caller's side (docs/workspaces.md "Undo, fork and diff"): take the
// last one back, fork the session at one, show what one changed. The turn points are the worker's
// (workspace-turns.ts); undo writes them only while no worker holds the session, in one script.

/**
 * KEYS: meta, lease, active, agent, log, seq.
 * ARGV: expected pointer, expected turns ('' for none), new turns, new pointer, state field, state value,
 *       message turn, message attempt, message type, message content, now, maxLogMessages, maxLogBytes (0: no limit).
 * → 1 done | -1 no such session | -2 being deleted | -3 a worker holds it or an activation waits (a turn runs
 *   or is about to) | -4 its pointer or turns changed since they were read | {-5, max, stored} its log is full of
 *   messages | {-6, max, bytes} of bytes (as ENQUEUE says it; nothing written).
 * The message is appended as WRITE appends one (seq, logBytes).
 */
const UNDO = `
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if redis.call('HEXISTS', KEYS[1], 'deleting') == 1 then return -2 end
if redis.call('EXISTS', KEYS[2]) == 1 or redis.call('EXISTS', KEYS[3]) == 1 then return -3 end
if (redis.call('HGET', KEYS[4], '${POINTER_FIELD}') or '') ~= ARGV[1] then return -4 end
if (redis.call('HGET', KEYS[4], '${TURNS_FIELD}') or '') ~= ARGV[2] then return -4 end
local maxLog = tonumber(ARGV[12]) or 0
local stored = tonumber(redis.call('GET', KEYS[6]) or '0')
if maxLog > 0 and stored >= maxLog then return {-5, maxLog, stored} end
local maxLogBytes = tonumber(ARGV[13]) or 0
local bytes = tonumber(redis.call('HGET', KEYS[1], 'logBytes') or '0')
if maxLogBytes > 0 and bytes >= maxLogBytes then return {-6, maxLogBytes, bytes} end
redis.call('HSET', KEYS[4], '${TURNS_FIELD}', ARGV[3], '${POINTER_FIELD}', ARGV[4], ARGV[5], ARGV[6])
local seq = tonumber(redis.call('GET', KEYS[6]) or '0') + 1
redis.call('XADD', KEYS[5], seq .. '-0', 'seq', seq, 'turn', ARGV[7], 'attempt', ARGV[8], 'type', ARGV[9], 'content', ARGV[10])
redis.call('SET', KEYS[6], seq)
redis.call('HINCRBY', KEYS[1], 'logBytes', #ARGV[10])
redis.call('HSET', KEYS[1], 'updatedAt', ARGV[11])
return 1
`;

/** Rounds of read-then-write before giving up when the session's turn points keep changing. */
const UNDO_ROUNDS = 5;

/** How long `undo --force` waits for the cancelled turn to end by default. */
const FORCE_WAIT_MS = 30_000;

interface Recorded {
  agent: string;
  pointerRaw: string;
  turnsRaw: string;
  points: TurnPoint[];
}

/** The session's agent and workspace records; NotFoundError (unknown), ConflictError (no workspace). */
async function recorded(parts: CallerParts, sessionId: string): Promise<Recorded> {
  const [agent, pointerRaw, turnsRaw] = await Promise.all([
    parts.redis.hget(parts.store.key(sessionId, 'meta'), 'agent'),
    parts.redis.hget(parts.store.key(sessionId, 'agent'), POINTER_FIELD),
    parts.redis.hget(parts.store.key(sessionId, 'agent'), TURNS_FIELD),
  ]);
  if (agent === null) throw new NotFoundError(`unknown session "${sessionId}"`);
  if (pointerRaw === null)
    throw new ConflictError(
      `session "${sessionId}" has no workspace (it runs in a caller's cwd, or no worker with workspaces has run it yet)`,
    );
  return { agent, pointerRaw, turnsRaw: turnsRaw ?? '', points: parseTurns(turnsRaw) };
}

/** The agent's `stateAtMark`: ConflictError naming the agent when it has none. */
function stateAtMark(agent: string): (state: string, mark: number) => string {
  const cut = isAgentName(agent) ? agentDefinition(agent).stateAtMark : undefined;
  if (cut === undefined)
    throw new ConflictError(
      `agent "${agent}" cannot take its conversation back to an earlier turn (it has no stateAtMark): undo and fork need it`,
    );
  return cut;
}

/** The point of `turn` (default: the latest), and its index in `points`. */
function pointOf(points: readonly TurnPoint[], sessionId: string, turn: number | undefined): number {
  if (turn !== undefined && (!Number.isSafeInteger(turn) || turn < 1))
    throw new InputError([{ field: 'turn', message: `must be a whole number ≥ 1 (got ${String(turn)})` }]);
  const index = turn === undefined ? points.length - 1 : points.findIndex((p) => p.turn === turn);
  const point = points[index];
  if (point === undefined || point.turn === 0) {
    if (turn === undefined)
      throw new ConflictError(`session "${sessionId}" has no completed turn recorded in its workspace`);
    const known = points.filter((p) => p.turn > 0).map((p) => p.turn);
    throw new InputError([
      {
        field: 'turn',
        message: `session "${sessionId}" has no recorded turn ${turn} (recorded: ${known.length === 0 ? 'none' : known.join(', ')})`,
      },
    ]);
  }
  return index;
}

/** True when a worker holds the session or an activation waits (a turn runs or is about to). */
async function busy(parts: CallerParts, sessionId: string): Promise<boolean> {
  return (await parts.redis.exists(parts.store.key(sessionId, 'lease'), parts.store.key(sessionId, 'active'))) > 0;
}

function runningError(sessionId: string, what: string): ConflictError {
  return new ConflictError(`session "${sessionId}" is running a turn (or one is queued): ${what} once it has ended`);
}

function needWorkspaces(parts: CallerParts): Workspaces {
  if (parts.workspaces === null)
    throw new ConflictError(
      "this client has no workspaces configured (workspaces.enabled, SESSIOND_WORKSPACES_ENABLED): fork and diff read the deployment's workspace store",
    );
  return parts.workspaces;
}

/** A workspace module's refusal (a snapshot the store does not have…) as a conflict of this session. */
function workspaceError(error: unknown): unknown {
  return error instanceof WorkspaceInputError ? new ConflictError(`workspace: ${error.message}`) : error;
}

export interface UndoResult {
  sessionId: string;
  /** The turn taken back. */
  undone: number;
  /** The turn whose files and conversation the session has again. */
  to: number;
  /** The workspace snapshot the session's next attempt starts on. */
  snapshot: string;
  /** `force` cancelled a running turn first. */
  cancelled: boolean;
}

/**
 * Takes back the session's last completed turn: its workspace pointer goes back to the previous
 * turn's snapshot and its agent's state to that turn's mark, and a `workspace.undone` message is
 * appended (the undone turn's messages stay). One script, and only while no worker holds the session
 * and no activation waits (else ConflictError; `force` cancels the running turn and waits for it to
 * end first). The next attempt's prepare restores the files on whichever host runs it.
 */
export async function undoTurn(
  parts: CallerParts,
  sessionId: string,
  options: { force?: boolean; waitMs?: number } = {},
): Promise<UndoResult> {
  checkSessionId(sessionId);
  let cancelled = false;
  if (options.force === true && (await busy(parts, sessionId))) {
    await recorded(parts, sessionId);
    await cancel(parts, sessionId, 'cancelled by undo --force');
    cancelled = true;
    const deadline = Date.now() + (options.waitMs ?? FORCE_WAIT_MS);
    while ((await busy(parts, sessionId)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  }
  for (let round = 0; round < UNDO_ROUNDS; round += 1) {
    const { agent, pointerRaw, turnsRaw, points } = await recorded(parts, sessionId);
    const index = pointOf(points, sessionId, undefined);
    const last = points[index] as TurnPoint;
    const target = points[index - 1];
    if (target === undefined)
      throw new ConflictError(
        `turn ${last.turn} is the oldest point recorded of session "${sessionId}": there is nothing earlier to go back to`,
      );
    if (target.turn === 0)
      throw new ConflictError(
        `turn ${last.turn} is the first turn of session "${sessionId}": undo goes back to a completed turn, and there is none before it (start a new session instead)`,
      );
    const cut = stateAtMark(agent);
    const now = Date.now();
    const back = takeBackTo(points, index - 1, { agent, label: `undo of turn ${last.turn}`, now });
    if ('refused' in back || back.state === null)
      throw new ConflictError(`${'refused' in back ? back.refused : 'the session start'}: it cannot be gone back to`);
    const { field } = back.state;
    const state = await parts.redis.hget(parts.store.key(sessionId, 'agent'), field);
    if (state === null) throw new ConflictError(`the agent's state of turn ${target.turn} (${field}) is not stored`);
    const pointer: WorkspacePointer = back.pointer;
    const k = (part: Parameters<typeof parts.store.key>[1]) => parts.store.key(sessionId, part);
    const reply = (await script(parts.redis, 'sessiondWorkspaceUndo', UNDO, 6)(
      k('meta'),
      k('lease'),
      k('active'),
      k('agent'),
      k('log'),
      k('seq'),
      pointerRaw,
      turnsRaw,
      JSON.stringify(back.turns),
      JSON.stringify(pointer),
      field,
      cut(state, back.state.mark),
      last.turn,
      0,
      'workspace.undone',
      JSON.stringify({ turn: last.turn, to: target.turn, snapshot: target.snapshot }),
      now,
      parts.limits.maxLogMessages,
      parts.limits.maxLogBytes,
    )) as number | [number, number, number];
    const [code, max, count] = Array.isArray(reply) ? reply : [reply, 0, 0];
    if (code === -5 || code === -6) {
      const [limit, what] =
        code === -5 ? (['maxLogMessages', 'messages'] as const) : (['maxLogBytes', 'bytes of messages'] as const);
      throw new QuotaError(
        limit,
        max,
        `session "${sessionId}" has ${count} ${what} stored, its message log is full (${limit} ${max}): nothing was undone`,
      );
    }
    if (code === 1) {
      // Its message count and updatedAt changed: the listing shows it (as a worker's write does).
      await parts.store.index(sessionId, { touch: true });
      return { sessionId, undone: last.turn, to: target.turn, snapshot: target.snapshot, cancelled };
    }
    if (code === -1) throw new NotFoundError(`unknown session "${sessionId}"`);
    if (code === -2) throw new ConflictError(`session "${sessionId}" is being deleted`);
    if (code === -3)
      throw runningError(
        sessionId,
        cancelled ? 'the cancelled turn did not end in time (or a queued prompt started); undo' : 'undo it (or force)',
      );
    // -4: a worker recorded a turn between the read and the script: read again.
  }
  throw new ConflictError(`session "${sessionId}"'s turns kept changing: nothing was undone`);
}

export interface ForkResult extends ImportResult {
  /** The source session's turn the new session starts after. */
  turn: number;
  /** The new session's workspace snapshot (a copy of that turn's). */
  snapshot: string;
}

/**
 * A new session (`as`) whose workspace files are those after turn `turn` of the source (default its
 * last) and whose agent conversation is the source's at that turn's mark, under an agent session of
 * its own; its messages are the source's up to that turn. The source is not changed. Refused while
 * the source runs a turn (ConflictError), for an id that exists, an unknown turn (InputError `turn`). The
 * new session keeps the source's tenant; with `owner` it takes a slot of that token's session cap (QuotaError).
 */
export async function forkAtTurn(
  parts: CallerParts,
  sessionId: string,
  options: { turn?: number; as: string; owner?: SessionOwner },
): Promise<ForkResult> {
  checkSessionId(sessionId);
  const as = options.as;
  if (typeof as !== 'string' || !SESSION_ID_PATTERN.test(as))
    throw new InputError([{ field: 'as', message: 'a session id must be 1-100 letters, digits or _.-' }]);
  if (as === sessionId) throw new InputError([{ field: 'as', message: 'must differ from the session forked' }]);
  const { agent, points } = await recorded(parts, sessionId);
  const workspaces = needWorkspaces(parts);
  const point = points[pointOf(points, sessionId, options.turn)] as TurnPoint;
  const cut = stateAtMark(agent);
  if (point.mark === null || point.agentSessionId === null)
    throw new ConflictError(`turn ${point.turn} was recorded without the agent's state mark: it cannot be forked at`);
  if (await busy(parts, sessionId)) throw runningError(sessionId, 'fork it');
  if ((await parts.redis.exists(parts.store.key(as, 'meta'))) === 1)
    throw new ConflictError(`session "${as}" already exists: fork under another id (as)`);
  const archive = (await readSession(parts.redis, parts.keys, sessionId))?.archive;
  if (archive === undefined) throw new NotFoundError(`unknown session "${sessionId}"`);
  const field = `${agent}:${point.agentSessionId}`;
  const state = archive.agent.find(([f]) => f === field)?.[1];
  if (state === undefined) throw new ConflictError(`the agent's state of turn ${point.turn} (${field}) is not stored`);
  const context = archive.snapshot?.snapshot.context;
  const forked = {
    ...archive,
    messages: archive.messages.filter((m) => m.turn <= point.turn),
    // Only the conversation at the turn's mark: the workspace fields are the new session's own (below).
    agent: [[field, cut(state, point.mark)]] as Array<[string, string]>,
    inbox: [],
    snapshot:
      archive.snapshot === null || context === undefined
        ? null
        : {
            ...archive.snapshot,
            snapshot: { ...archive.snapshot.snapshot, context: { ...context, agentSessionId: point.agentSessionId } },
          },
  };
  let copied: string;
  try {
    copied = await workspaces.copy(sessionId, point.snapshot, as);
  } catch (error) {
    throw workspaceError(error);
  }
  const at = Date.now();
  // An archive does not carry the tenant (fleet limits may match on it): the fork's is its source's.
  const tenant = await parts.redis.hget(parts.store.key(sessionId, 'meta'), 'tenant');
  try {
    const created = await withOwnerSlot(parts.redis, parts.keys, options.owner, as, async () => ({
      ok: true,
      created: true,
      result: await importSession(parts.store, parts.queue, writeArchive(forked), {
        as,
        deployment: await parts.deploymentPolicy(),
        limits: {
          maxArchiveBytes: parts.limits.maxArchiveBytes,
          maxArchiveLineBytes: parts.limits.maxArchiveLineBytes,
        },
        ...(tenant === null ? {} : { extraMeta: { tenant } }),
        extraAgent: (agentSessionId) => {
          const pointer: WorkspacePointer = {
            version: 1,
            snapshot: copied,
            label: `fork of ${sessionId} turn ${point.turn}`.slice(0, 200),
            at,
            turn: point.turn,
            attempt: 0,
            agentSessionId,
            promptRecorded: true,
          };
          const turns: TurnPoint[] = [{ turn: point.turn, snapshot: copied, at, agentSessionId, mark: point.mark }];
          return [
            [POINTER_FIELD, JSON.stringify(pointer)],
            [TURNS_FIELD, JSON.stringify(turns)],
          ];
        },
      }),
    }));
    return { ...created.result, turn: point.turn, snapshot: copied };
  } catch (error) {
    // The new session was not written: its copied snapshot goes too (nothing else names it).
    await workspaces.remove(as).catch(() => undefined);
    throw error;
  }
}

export interface DiffResult {
  sessionId: string;
  turn: number;
  /** The turn the change is counted from (0: the session's start). */
  from: number;
  /** A unified diff of the workspace's files, or `git diff --stat`'s summary. */
  diff: string;
}

/**
 * What turn `turn` (default: the last) changed in the session's workspace files: the diff from the
 * previous turn's snapshot (turn 1: the session's start) to that turn's. A turn may be running: the
 * diff reads recorded snapshots through the caller's own git data (parts.ts callerWorkspaces), never
 * the holder's.
 */
export async function turnDiff(
  parts: CallerParts,
  sessionId: string,
  options: { turn?: number; stat?: boolean } = {},
): Promise<DiffResult> {
  checkSessionId(sessionId);
  const { points } = await recorded(parts, sessionId);
  const workspaces = needWorkspaces(parts);
  const index = pointOf(points, sessionId, options.turn);
  const point = points[index] as TurnPoint;
  const previous = points[index - 1];
  if (previous === undefined)
    throw new ConflictError(
      `turn ${point.turn} is the oldest point recorded of session "${sessionId}": there is no earlier one to diff it against`,
    );
  try {
    const diff = await workspaces.diff(sessionId, previous.snapshot, point.snapshot, {
      ...(options.stat === true ? { stat: true } : {}),
    });
    return { sessionId, turn: point.turn, from: previous.turn, diff };
  } catch (error) {
    throw workspaceError(error);
  }
}
