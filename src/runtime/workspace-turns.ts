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
