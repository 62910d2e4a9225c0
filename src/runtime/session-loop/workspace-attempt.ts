import { setTimeout as sleep } from 'node:timers/promises';
import { CONTINUATION_PROMPT } from '../../../machines/retry-request.ts';
import type { AttemptRequest } from '../../../machines/types.ts';
import { terminalFailed, type MessageOf } from '../../protocol/index.ts';
import type { WorkspaceQuotaError, Snapshot, Workspaces, WorkspaceSource } from '../../workspace/types.ts';
import type { SessionWriter } from '../session-writer.ts';
import type { SessionStore } from '../store/session-store.ts';
import { parseTurns, TURNS_FIELD, withTurn, type TurnPoint } from '../workspace-turns.ts';
import { stateField, type AgentAttempt } from './agent-attempt.ts';
import type { WarnLog } from './config.ts';
import { pauseProcesses, type SpawnedAgent } from './pause-processes.ts';

/** The field of the session's agent-state hash that holds its workspace pointer. */
export const POINTER_FIELD = 'workspace';

/** How long the runner waits for the agent's state to record a tool's result it has reported. */
const RESULT_WAIT_MS = 3000;
const RESULT_POLL_MS = 20;

/**
 * The latest recorded point of a session's workspace: a snapshot of its files and, written in the
 * same fenced batch, the agent's state (its conversation) at that same point. Versioned: it is
 * stored with the session.
 */
export interface WorkspacePointer {
  version: 1;
  /** The snapshot the session's next attempt starts on. */
  snapshot: string;
  label: string;
  at: number;
  turn: number;
  attempt: number;
  /** The agent session whose state (field `<agent>:<id>` of the same hash) matches the snapshot; null: none yet. */
  agentSessionId: string | null;
  /** That state holds the prompt of turn `turn` (an attempt that resumes it continues the turn). */
  promptRecorded: boolean;
  /** The next attempt starts a new agent conversation (a rollback of the first turn, rollback.ts); absent: false. */
  fresh?: boolean;
}

export function parsePointer(raw: string | null): WorkspacePointer | null {
  if (raw === null) return null;
  try {
    const value = JSON.parse(raw) as Partial<WorkspacePointer>;
    if (value.version !== 1 || typeof value.snapshot !== 'string') return null;
    return value as WorkspacePointer;
  } catch {
    // A pointer that does not parse is treated as none (the workspace then starts anew): said by the caller.
    return null;
  }
}

/** The terminal message of an attempt whose snapshot went over the workspace's quota. */
export function quotaMessage(error: WorkspaceQuotaError): MessageOf<'terminal.failed'> {
  return terminalFailed(
    `${error.message} (workspaces.${error.field}): the attempt was stopped; the workspace is back at its last recorded snapshot`,
    'quota',
  );
}

export interface AttemptWorkspaceInit {
  workspaces: Workspaces;
  store: SessionStore;
  writer: SessionWriter;
  sessionId: string;
  request: AttemptRequest;
  attempt: AgentAttempt;
  /** The retry policy says `workspace: "rollback"`: a failed attempt is undone whole. */
  rollback: boolean;
  warn: WarnLog;
  /**
   * A point of the agent's run was recorded that this attempt's own end cannot undo (a tool's, without `rollback`;
   * its completed end), in the writer's pending batch: called at once, so that what it adds goes in the same write.
   */
  onRecorded?: () => void;
}

/**
 * One attempt's workspace: prepared on this host at the session's latest recorded point, recorded
 * again after every tool call the agent completes (files and the agent's state cut at that tool's
 * result, in one fenced write) and at the attempt's completed end; after any other end the host's
 * copy goes back to the latest recorded point (or, with `rollback`, to the attempt's start).
 * Contract: the files and the agent state a pointer names always describe the same moment.
 */
export class AttemptWorkspace {
  readonly #init: AttemptWorkspaceInit;
  /** The latest recorded point (what the next attempt starts on). */
  #pointer: WorkspacePointer | null = null;
  /** The point this attempt started on (rollback). */
  #start: WorkspacePointer | null = null;
  /** The agent's state at the attempt's start, as stored (rollback). */
  #startState: string | null = null;
  /** Tool calls announced and not ended yet, and those ended since the last record. */
  readonly #inFlight = new Set<string>();
  readonly #ended: string[] = [];
  /** The tool calls the agent's current process reported ended (a steer's restart starts another process). */
  #runToolCallsEnded = 0;
  /** The session's turn points (workspace-turns.ts), as read at the start. */
  #turns: TurnPoint[] = [];
  /** The agent's process as spawned (its spawn report): tells its own processes from its tools'. */
  #agent: SpawnedAgent | null = null;
  /**
   * A snapshot the copy still holds exactly: the attempt's start (nothing runs a tool until the
   * agent asks for one), or the last tool batch's while nothing can have changed the files since it
   * (taken with only the agent's own processes alive, its tools all gone, and no tool call started
   * after it). A completed end then records it again rather than taking another (completed()).
   */
  #unchanged: Snapshot | null = null;
  /** A tool batch was recorded that a failure with `rollback` would undo: `onRecorded` waits for the attempt's end. */
  #undoable = false;

  constructor(init: AttemptWorkspaceInit) {
    this.#init = init;
  }

  /** The latest recorded conversation holds this attempt's turn's prompt. */
  get recordedPrompt(): boolean {
    return this.#pointer !== null && this.#pointer.turn === this.#init.request.turn && this.#pointer.promptRecorded;
  }

  /**
   * Makes this host's copy hold the latest recorded snapshot (restored from the store when needed),
   * and says which agent session and which text the attempt sends so that its conversation is the
   * one recorded with those files. Throws WorkspaceQuotaError when the start's snapshot is over quota.
   */
  async begin(source: WorkspaceSource | undefined): Promise<{ resumeSessionId: string | null; text: string }> {
    const { workspaces, store, sessionId, request } = this.#init;
    const stored = await store.agentState(sessionId, POINTER_FIELD);
    const previous = parsePointer(stored);
    if (stored !== null && previous === null)
      this.#init.warn('the workspace pointer did not parse: the workspace starts anew', null);
    // Only this session's holder writes them (in its fenced batches); undo writes them only while none holds it.
    this.#turns = parseTurns(await store.agentState(sessionId, TURNS_FIELD));
    await workspaces.prepare(sessionId, previous?.snapshot ?? null, previous === null ? source : undefined);
    // The conversation recorded with these files: its session, and whether it holds this turn's prompt already.
    const resumeSessionId =
      previous?.fresh === true ? previous.agentSessionId : (previous?.agentSessionId ?? request.agentSessionId);
    const recorded = previous !== null && previous.turn === request.turn && previous.promptRecorded;
    // A retry after a crash: the machine sends the prompt again (it saw no terminal message), but the
    // recorded conversation holds it with the tool results after it: that conversation goes on.
    const text = recorded && !request.continuation ? CONTINUATION_PROMPT : request.text;
    if (this.#init.rollback && resumeSessionId !== null)
      this.#startState = await store.agentState(sessionId, stateField(this.#init.attempt, resumeSessionId));
    if (previous !== null) {
      // The copy holds exactly the pointer's snapshot (prepare): the attempt starts on it, no new snapshot.
      this.#pointer = {
        ...previous,
        turn: request.turn,
        attempt: request.attempt,
        agentSessionId: resumeSessionId,
        promptRecorded: recorded,
      };
      this.#init.writer.agentState(POINTER_FIELD, JSON.stringify(this.#pointer));
      if (this.#toolsOnly())
        this.#unchanged = { id: previous.snapshot, parent: null, label: previous.label, at: previous.at };
    } else {
      const snapshot = await workspaces.snapshot(
        sessionId,
        `turn ${request.turn} attempt ${request.attempt} start`,
        null,
      );
      this.#record(snapshot, resumeSessionId, recorded, null);
      if (this.#toolsOnly()) this.#unchanged = snapshot;
      // The session's start: what undoing its first turn would go back to, and what that turn's diff is from.
      this.#turns = [{ turn: 0, snapshot: snapshot.id, at: snapshot.at, agentSessionId: null, mark: null }];
      this.#init.writer.agentState(TURNS_FIELD, JSON.stringify(this.#turns));
    }
    this.#start = this.#pointer;
    return { resumeSessionId, text };
  }

  /**
   * The agent changes the workspace only through tool calls it reports, whose batches are recorded
   * (pi: `filesOnlyThroughTools` with `stateAfterTool`). Other agents' file edits are not known to
   * come only as tool calls (Claude Code's hooks may run after its last tool): their completed ends
   * always take a snapshot.
   */
  #toolsOnly(): boolean {
    const { agent } = this.#init.attempt;
    return agent.filesOnlyThroughTools === true && agent.stateAfterTool !== undefined;
  }

  /** The agent's process started (its spawn report). */
  agentStarted(agent: SpawnedAgent): void {
    this.#agent = agent;
    this.#runToolCallsEnded = 0;
  }

  /** The agent announced a tool call (it runs once the agent's message has ended). */
  toolCalled(toolCallId: string): void {
    this.#inFlight.add(toolCallId);
    this.#unchanged = null;
  }

  /**
   * A tool call ended (its result reported). Once no other call of the same batch still runs
   * (pi runs a message's tool calls in parallel and writes their results together), the files are
   * recorded, then the agent's state cut just after those results, and both written together: a
   * snapshot never holds half of a tool that still runs. An agent whose state cannot be cut (no
   * `stateAfterTool`) records nothing here. Stops waiting for the agent's state once `signal` aborts
   * (a cancel, a timeout: the agent is being stopped and may never write the result; the attempt's end
   * puts the copy back). Throws WorkspaceQuotaError over quota.
   */
  async toolEnded(toolCallId: string, agentSessionId: string | null, signal?: AbortSignal): Promise<void> {
    this.#inFlight.delete(toolCallId);
    this.#ended.push(toolCallId);
    this.#runToolCallsEnded += 1;
    this.#unchanged = null;
    if (this.#inFlight.size > 0) return;
    const ids = this.#ended.splice(0);
    const run = { toolCallsEnded: this.#runToolCallsEnded };
    const { attempt, workspaces, sessionId, request } = this.#init;
    const cutter = attempt.agent.stateAfterTool;
    const exporter = attempt.agent.exportState;
    if (cutter === undefined || exporter === undefined || agentSessionId === null) return;
    // pi does not wait for sessiond: its next model request (and tools) go on. Its processes are
    // held still while the files and its state are read, so both show the same moment.
    let paused = await pauseProcesses(attempt.marker, this.#agent);
    try {
      const deadline = Date.now() + RESULT_WAIT_MS;
      let cut: { state: string; later: boolean } | null = null;
      for (;;) {
        const state = await exporter(attempt.options, agentSessionId);
        cut = state === null ? null : longestCut(ids.map((id) => cutter(state, id, run)));
        if (cut !== null || Date.now() >= deadline || signal?.aborted === true) break;
        // The result is written just after the tool's end is printed: the agent runs on until then.
        paused.resume();
        await sleep(RESULT_POLL_MS);
        paused = await pauseProcesses(attempt.marker, this.#agent);
      }
      if (cut === null) {
        // Stopped meanwhile: nothing to record (the stop's end restores the latest recorded point).
        if (signal?.aborted === true) return;
        this.#init.warn("the agent's state did not record a tool's result in time: not recorded", null, {
          toolCallIds: ids,
        });
        return;
      }
      if (cut.later) {
        // The agent already asked for its next tools, which may be changing the files: the next record covers both.
        return;
      }
      const snapshot = await workspaces.snapshot(
        sessionId,
        `turn ${request.turn} tool ${ids.join(' ')}`.slice(0, 200),
        this.#pointer?.snapshot ?? null,
      );
      this.#record(snapshot, agentSessionId, true, cut.state);
      // With `rollback` a failure puts the agent's state back to the attempt's start: this point is not for keeps yet.
      if (this.#init.rollback) this.#undoable = true;
      else this.#init.onRecorded?.();
      // Only the agent's own processes were held: until it starts another tool, nothing changes the files.
      this.#unchanged = paused.agentOnly && this.#toolsOnly() ? snapshot : null;
    } finally {
      paused.resume();
    }
  }

  /**
   * The attempt completed: its end is taken (files and the agent's whole state), and with them the
   * turn's point (its snapshot and the agent's state mark). The files are the last tool batch's
   * snapshot when nothing can have changed them since (the agent writes files only through its tools;
   * see #unchanged), else a new snapshot. Nothing is recorded yet: the returned function queues it all
   * for the session's next fenced write, and the runner has it called with the attempt's
   * terminal.completed, in the same write (message-sink.ts setAnswerRecord). Not called (the machine
   * stopped the attempt first), the latest recorded point stays, and abandon() puts the copy back
   * there. Throws WorkspaceQuotaError.
   */
  async completed(agentSessionId: string | null): Promise<() => void> {
    const { attempt, workspaces, sessionId, request } = this.#init;
    const unchanged = this.#unchanged;
    this.#unchanged = null;
    // Either way the agent's processes are gone: the next attempt on this host finds the copy as recorded.
    const reuse =
      unchanged !== null &&
      unchanged.id === this.#pointer?.snapshot &&
      (await workspaces.settle(sessionId, unchanged.id));
    let snapshot: Snapshot;
    if (reuse) snapshot = unchanged;
    else {
      snapshot = await workspaces.snapshot(
        sessionId,
        `turn ${request.turn} attempt ${request.attempt} end`,
        this.#pointer?.snapshot ?? null,
        { settled: true },
      );
    }
    const state =
      agentSessionId === null || attempt.agent.exportState === undefined
        ? null
        : await attempt.agent.exportState(attempt.options, agentSessionId);
    const marker = attempt.agent.stateMark;
    let mark: number | null = null;
    if (state !== null && marker !== undefined) {
      try {
        mark = marker(state);
      } catch (error) {
        // A state the agent cannot read: the turn is recorded without a mark (it cannot be undone to or forked at).
        this.#init.warn("the agent's state gave no mark: this turn cannot be undone to or forked at", error);
      }
    }
    return () => {
      this.#record(snapshot, agentSessionId, true, state);
      // What the recorded state holds (the fallback's steers delivered) goes in the same write.
      this.#init.onRecorded?.();
      this.#turns = withTurn(this.#turns, {
        turn: request.turn,
        snapshot: snapshot.id,
        at: snapshot.at,
        agentSessionId,
        mark,
      });
      this.#init.writer.agentState(TURNS_FIELD, JSON.stringify(this.#turns));
    };
  }

  /**
   * Any other end (failed, cancelled, stopped at a quota): the host's copy goes back to the latest
   * recorded point, or with `rollback` (a failed attempt) to the attempt's start, files and agent
   * state. Returns whether the recorded conversation holds this turn's prompt (the retry then
   * continues it rather than sending the prompt again).
   */
  async abandon(how: { failed: boolean }): Promise<boolean> {
    const { workspaces, sessionId, writer } = this.#init;
    const rollback = how.failed && this.#init.rollback && this.#start !== null;
    const target = rollback ? this.#start : this.#pointer;
    if (target === null) return false;
    if (rollback) {
      const id = target.agentSessionId;
      if (id !== null && this.#startState !== null)
        writer.agentState(stateField(this.#init.attempt, id), this.#startState);
      writer.agentState(POINTER_FIELD, JSON.stringify({ ...target, at: Date.now() }));
      this.#pointer = target;
    } else if (this.#undoable) {
      // Not undone (a cancel, a stop): the tool batch recorded last is the point the session goes on from.
      this.#init.onRecorded?.();
    }
    await workspaces.restore(sessionId, target.snapshot);
    return this.recordedPrompt;
  }

  /** The pointer and the matching agent state go into the session's next fenced write, together. */
  #record(snapshot: Snapshot, agentSessionId: string | null, promptRecorded: boolean, state: string | null): void {
    const { request, writer } = this.#init;
    const pointer: WorkspacePointer = {
      version: 1,
      snapshot: snapshot.id,
      label: snapshot.label,
      at: snapshot.at,
      turn: request.turn,
      attempt: request.attempt,
      agentSessionId,
      promptRecorded,
    };
    if (state !== null && agentSessionId !== null)
      writer.agentState(stateField(this.#init.attempt, agentSessionId), state);
    writer.agentState(POINTER_FIELD, JSON.stringify(pointer));
    this.#pointer = pointer;
  }
}

/** The cut that holds every result (the results of one batch are written together, in order); null if one is missing. */
function longestCut<C extends { state: string }>(cuts: ReadonlyArray<C | null>): C | null {
  let longest: C | null = null;
  for (const cut of cuts) {
    if (cut === null) return null;
    if (longest === null || cut.state.length > longest.state.length) longest = cut;
  }
  return longest;
}
