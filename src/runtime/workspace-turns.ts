/**
 * A workspace session's per-turn points (docs/workspaces.md "Undo, fork and diff"): at each
 * completed turn's end the worker records the turn's snapshot and a mark of the agent's state
 * (agent-definition.ts `stateMark`) in field TURNS_FIELD of the session's agent-state hash, in the
 * same fenced batch as the workspace pointer. Undo, fork and diff (caller/workspace-turns.ts) read
 * them. Shared by the worker and the caller side, so it imports neither.
 */

/** The field of the session's agent-state hash that holds its turn points (JSON array, oldest first). */
export const TURNS_FIELD = 'workspace-turns';

/** Turn points kept per session: the newest; older turns can no longer be undone, forked or diffed. */
export const TURNS_KEPT = 100;

/** The session's state after one completed turn (turn 0: its start, before any turn). */
export interface TurnPoint {
  turn: number;
  /** The workspace snapshot at the turn's end. */
  snapshot: string;
  at: number;
  /** The agent session whose state goes with it; null: none (the start). */
  agentSessionId: string | null;
  /** The agent's state mark at the turn's end (agent `stateMark`); null: none (the start, or an agent without marks). */
  mark: number | null;
}

function isPoint(value: unknown): value is TurnPoint {
  if (typeof value !== 'object' || value === null) return false;
  const p = value as Record<string, unknown>;
  return (
    Number.isSafeInteger(p.turn) &&
    typeof p.snapshot === 'string' &&
    typeof p.at === 'number' &&
    (p.agentSessionId === null || typeof p.agentSessionId === 'string') &&
    (p.mark === null || Number.isSafeInteger(p.mark))
  );
}

/** The stored list; a value that does not parse counts as none (nothing to undo, fork or diff). */
export function parseTurns(raw: string | null): TurnPoint[] {
  if (raw === null) return [];
  try {
    const value = JSON.parse(raw) as unknown;
    return Array.isArray(value) ? value.filter(isPoint) : [];
  } catch {
    // Not JSON: treated as no points (said by the caller's error: "no recorded turn").
    return [];
  }
}

/** The list with `point` appended (a point of the same turn replaced), the newest TURNS_KEPT kept. */
export function withTurn(points: readonly TurnPoint[], point: TurnPoint): TurnPoint[] {
  return [...points.filter((p) => p.turn < point.turn), point].slice(-TURNS_KEPT);
}

/**
 * The field of the session's agent-state hash that holds a pending rollback (`whenBusy: "rollback"`): the holder that
 * handled the interrupting prompt's cancel writes `{turn}` there in the same fenced write that clears the cancel, and
 * the holder that starts the next turn takes that turn back in the fenced write that clears it (session-loop/rollback.ts).
 * '' or absent: none.
 */
export const ROLLBACK_FIELD = 'workspace-rollback';

/** A pending rollback: the turn to take back. */
export interface RollbackIntent {
  turn: number;
  at: number;
}

/** The stored intent; '' (handled), absent or a value that does not parse: none. */
export function parseRollback(raw: string | null): RollbackIntent | null {
  if (raw === null || raw === '') return null;
  try {
    const value = JSON.parse(raw) as Partial<RollbackIntent>;
    return Number.isSafeInteger(value.turn) && typeof value.at === 'number'
      ? { turn: value.turn as number, at: value.at }
      : null;
  } catch {
    // Not JSON: no intent (only the holder writes it, always as JSON).
    return null;
  }
}

/** The workspace pointer going back to a recorded point (session-loop/workspace-attempt.ts `WorkspacePointer`). */
export interface TakenBackPointer {
  version: 1;
  snapshot: string;
  label: string;
  at: number;
  turn: number;
  attempt: 0;
  agentSessionId: string | null;
  promptRecorded: true;
  /** Back to the session's start: the next attempt starts a new agent conversation. */
  fresh?: true;
}

/**
 * Going back to the recorded point at `index` of `points` (undo, caller/workspace-turns.ts; a whenBusy "rollback",
 * session-loop/rollback.ts): the points kept (up to it), the workspace pointer to write, and the agent's state to cut
 * at the point's mark (`field` of the agent-state hash: `<agent>:<agent session>`; null at the session's start, which
 * gets a new conversation), or why it cannot be done. Pure: the callers read the state and make the writes.
 */
export function takeBackTo(
  points: readonly TurnPoint[],
  index: number,
  how: { agent: string; label: string; now: number },
):
  | { refused: string }
  | { to: TurnPoint; turns: TurnPoint[]; pointer: TakenBackPointer; state: { field: string; mark: number } | null } {
  const to = points[index];
  if (to === undefined) return { refused: 'no earlier point is recorded' };
  const turns = points.slice(0, index + 1);
  const pointer: TakenBackPointer = {
    version: 1,
    snapshot: to.snapshot,
    label: how.label,
    at: how.now,
    turn: to.turn,
    attempt: 0,
    agentSessionId: to.agentSessionId,
    promptRecorded: true,
  };
  // The session's start: its files, and a conversation of its own (the agent's state of the old one is left unused).
  if (to.turn === 0) return { to, turns, pointer: { ...pointer, agentSessionId: null, fresh: true }, state: null };
  if (to.mark === null || to.agentSessionId === null)
    return { refused: `turn ${to.turn} was recorded without the agent's state mark` };
  return { to, turns, pointer, state: { field: `${how.agent}:${to.agentSessionId}`, mark: to.mark } };
}
