import type { AttemptRequest } from '../../../machines/types.ts';
import type { SessionWriter } from '../session-writer.ts';
import type { SessionStore } from '../store/session-store.ts';
import {
  parseRollback,
  parseTurns,
  ROLLBACK_FIELD,
  takeBackTo,
  TURNS_FIELD,
  type TurnPoint,
} from '../workspace-turns.ts';
import type { AgentAttempt } from './agent-attempt.ts';
import { parsePointer, POINTER_FIELD } from './workspace-attempt.ts';

/**
 * `whenBusy: "rollback"` (docs/workspaces.md "Rollback"): the holder that handled the interrupting prompt's cancel
 * recorded the turn to take back (requests.ts, ROLLBACK_FIELD). The first attempt of a later turn, before its
 * workspace is prepared, takes that turn back as `sessiond undo` would — the workspace pointer to the last completed
 * turn before it (or the session's start, with a new agent conversation), the agent's state cut at that turn's mark,
 * a `workspace.undone` message — and clears the intent, all in one fenced write flushed before the workspace is
 * prepared: a worker that dies before it lands leaves the intent for the next one; once it has landed it is never
 * done again. Where it cannot be done (no workspace here, nothing recorded to go back to), a `workspace.not_undone`
 * message says so, in the same write that clears the intent.
 */
export async function takeBackInterrupted(init: {
  store: SessionStore;
  writer: SessionWriter;
  sessionId: string;
  request: AttemptRequest;
  attempt: AgentAttempt;
  /** This attempt runs in a workspace (false: a caller's cwd, or a worker without workspaces). */
  workspace: boolean;
}): Promise<void> {
  const { store, writer, sessionId, request } = init;
  const intent = parseRollback(await store.agentState(sessionId, ROLLBACK_FIELD));
  // None, or the interrupted turn has not ended yet (the attempt is of that turn): nothing to do now.
  if (intent === null || intent.turn >= request.turn) return;
  const outcome = init.workspace ? await plan(init, intent.turn) : { refused: 'the session runs without a workspace' };
  if ('refused' in outcome) {
    await writer.message(intent.turn, 0, 'workspace.not_undone', {
      turn: intent.turn,
      reason: `interrupted by a whenBusy "rollback" prompt but not taken back: ${outcome.refused}`,
    });
  } else {
    for (const [field, value] of outcome.writes) writer.agentState(field, value);
    await writer.message(intent.turn, 0, 'workspace.undone', {
      turn: intent.turn,
      to: outcome.to.turn,
      snapshot: outcome.to.snapshot,
      rollback: true,
    });
  }
  writer.agentState(ROLLBACK_FIELD, '');
  // In Redis before the workspace is prepared from the pointer (workspace-attempt.ts begin reads it from there).
  await writer.flush();
}

/** The writes that take turn `turn` back, or why they cannot be made. */
async function plan(
  init: { store: SessionStore; sessionId: string; attempt: AgentAttempt },
  turn: number,
): Promise<{ refused: string } | { writes: Array<[string, string]>; to: TurnPoint }> {
  const { store, sessionId, attempt } = init;
  const pointer = parsePointer(await store.agentState(sessionId, POINTER_FIELD));
  if (pointer === null) return { refused: 'its workspace has no recorded point' };
  const points = parseTurns(await store.agentState(sessionId, TURNS_FIELD));
  const index = points.findLastIndex((p) => p.turn < turn);
  const target = points[index];
  if (target === undefined) return { refused: `no point before turn ${turn} is recorded` };
  const cut = attempt.agent.stateAtMark;
  if (target.turn !== 0 && cut === undefined)
    return { refused: `agent "${attempt.agentName}" cannot take its conversation back (no stateAtMark)` };
  const back = takeBackTo(points, index, {
    agent: attempt.agentName,
    label: `rollback of turn ${turn}`,
    now: Date.now(),
  });
  if ('refused' in back) return back;
  const writes: Array<[string, string]> = [[TURNS_FIELD, JSON.stringify(back.turns)]];
  if (back.state !== null && cut !== undefined) {
    const state = await store.agentState(sessionId, back.state.field);
    if (state === null)
      return { refused: `the agent's state of turn ${target.turn} (${back.state.field}) is not stored` };
    writes.push([back.state.field, cut(state, back.state.mark)]);
  }
  writes.push([POINTER_FIELD, JSON.stringify(back.pointer)]);
  return { writes, to: target };
}
