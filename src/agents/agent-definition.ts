import type { z } from 'zod';
import type { PermissionKnobs } from '../policy/knobs.ts';
import type { CliMessage } from '../protocol/index.ts';
import type { AgentMapper } from './shared/agent-mapper.ts';
import type { RunContext } from './shared/run-attempt.ts';

/**
 * One attempt of an agent as the layers above ask for it, whatever the agent:
 * the text to send, the agent's own session to resume (if any), and the
 * agent's options for this turn (validated by the agent; invalid ones end the
 * attempt as a `startup` failure).
 */
export interface AgentRequest {
  text: string;
  resumeSessionId: string | null;
  options: Readonly<Record<string, unknown>>;
}

export type AgentRun = (request: AgentRequest, context: RunContext) => AsyncIterable<CliMessage>;

/**
 * An agent behind the shared contract: a folder under src/agents/ with
 * options, mapper, provider and this definition. `exportState` / `importState`
 * carry the agent's own conversation state (e.g. pi's session file) between
 * hosts as an opaque string; both are absent for an agent that keeps none locally.
 */
export interface AgentDefinition {
  run: AgentRun;
  /** What a caller may choose per session or turn (see shared/caller-options.ts); strict. */
  callerOptions: z.ZodType<Record<string, unknown>>;
  /** Its privileges, as a deployment policy bounds them (src/policy). */
  permissions: PermissionKnobs;
  /** Reads the agent's raw stream (for `sessiond normalize --agent`). */
  createMapper(options: { resumeSessionId?: string }): AgentMapper;
  exportState?(options: Readonly<Record<string, unknown>>, agentSessionId: string): Promise<string | null>;
  /**
   * Writes a state back on this host. `exact`: the state replaces the local copy even when that one
   * is further along (a workspace session going back to a recorded point, docs/workspaces.md).
   */
  importState?(
    options: Readonly<Record<string, unknown>>,
    agentSessionId: string,
    state: string,
    how?: { exact?: boolean },
  ): Promise<void>;
  /**
   * The exported state cut just after the recorded result of tool call `toolCallId`: the
   * conversation as it stood when that tool's result was written, nothing after it; `later`: the
   * state holds a tool call made after that result (the agent may be running it). Null when the
   * state holds no result of that call (yet). `run.toolCallsEnded`: how many tool calls the agent's
   * current process has reported ended, this one included (Codex: its printed item ids are not the
   * call ids its rollout holds, but the k-th tool item it reports is the k-th its rollout's turn
   * records). Pure. Absent: a workspace session of this agent records its files and conversation
   * together only at an attempt's start and completed end.
   */
  stateAfterTool?(
    state: string,
    toolCallId: string,
    run: { toolCallsEnded: number },
  ): { state: string; later: boolean } | null;
  /**
   * The agent changes its workspace only through the tool calls it reports, whose results
   * `stateAfterTool` finds (pi): a workspace attempt's completed end then records the last tool
   * batch's snapshot again when nothing can have changed the files since. Absent: every completed
   * end takes a snapshot (an agent whose hooks or own code may write files after its last tool).
   */
  filesOnlyThroughTools?: true;
  /**
   * The exported state as a copy under another agent session id (`import --as` a new id: the copy
   * must not share the original's conversation file on a host). Absent: the copy starts a new
   * conversation. Pure; throws for a state it cannot read.
   */
  forkState?(state: string, from: string, to: string): string;
  /**
   * A mark of the exported state as it stands (pi: its session file's line count), recorded with a
   * workspace session's turn so that `stateAtMark` can take the conversation back to that turn's
   * end (undo, fork at a turn). Pure. Absent (with `stateAtMark`): this agent's sessions cannot be
   * undone or forked at a turn.
   */
  stateMark?(state: string): number;
  /**
   * The state as it stood at `mark` (a state further along, the same conversation): pi's session
   * file cut back to its first `mark` lines. Pure; throws for a mark the state does not reach.
   */
  stateAtMark?(state: string, mark: number): string;
  /**
   * Checks a state as an archive brings it, before anything is written: `agentSessionId` has this
   * agent's id shape, and the state is that session's own (its file is the one of that id, under
   * the agent's own folder). Pure; throws an Error whose message starts with the field at fault
   * (`field: …` for the id, `value.<name>: …` for the state). `importState` runs it too.
   */
  checkState?(state: string, agentSessionId: string): void;
  /**
   * `native`: `run` reads `RunContext.steering` and puts steers into the running turn through the
   * agent's own channel (shared/steering.ts). `advertised`: the agent has that channel only when it
   * says so as it starts (an ACP agent's `initialize`): `run` gets `RunContext.steering` and calls
   * `RunContext.steeringNative` once it knows, before any tool call; until it does, and for the
   * steers the attempt starts with, the fallback applies. Absent: a steer stops the attempt at its
   * next tool boundary and the turn goes on in a new attempt with the text (the fallback).
   */
  steering?: 'native' | 'advertised';
}
