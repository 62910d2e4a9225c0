import { agentDefinition, isAgentName, type AgentDefinition, type AgentName } from '../../agents/registry.ts';
import { attemptOptions } from '../deployment-policy.ts';
import { markerOwner, newMarker } from '../orphans.ts';
import type { SessionWriter } from '../session-writer.ts';
import type { SessionStore } from '../store/session-store.ts';
import type { WarnLog } from './config.ts';

/**
 * The per-attempt plumbing between a session and its agent, apart from the session's driving
 * (ActiveSession): which agent runs, its options on this host, its own conversation state
 * carried in and out of Redis with the session, and the marker its processes inherit.
 */
export interface AgentAttempt {
  readonly agentName: AgentName | `acp:${string}`;
  readonly agent: AgentDefinition;
  /** The host's options of this agent, merged with the caller's admitted options. */
  readonly options: Readonly<Record<string, unknown>>;
  /** Found in /proc, it names this worker and the session: whose the processes are. */
  readonly marker: string;
}

export interface AgentAttemptInput {
  /** The agent the deployment policy admitted for this turn. */
  agentName: string;
  /** Host options per agent (the worker's configuration). */
  hostOptions: Readonly<Record<string, Readonly<Record<string, unknown>>>>;
  /** The caller's options as admitted by the deployment policy. */
  callerOptions: Readonly<Record<string, unknown>>;
  sessionId: string;
  /** The marker scope of this deployment (markerScope(prefix)). */
  scope: string;
}

/** Looks up the agent and its options, and makes the marker. Throws for an agent this host does not know. */
export async function prepareAgentAttempt(input: AgentAttemptInput): Promise<AgentAttempt> {
  const { agentName } = input;
  if (!isAgentName(agentName)) throw new Error(`unknown agent "${agentName}"`);
  return {
    agentName,
    agent: agentDefinition(agentName),
    options: attemptOptions(input.hostOptions[agentName] ?? {}, input.callerOptions),
    marker: newMarker(await markerOwner(), input.scope, input.sessionId),
  };
}

/** The field of the session's agent-state hash that holds one agent session's state. */
export function stateField(attempt: AgentAttempt, agentSessionId: string): string {
  return `${attempt.agentName}:${agentSessionId}`;
}

/** Before the agent starts: writes its stored state (e.g. pi's session file) back onto this host. */
export async function importAgentState(
  attempt: AgentAttempt,
  store: SessionStore,
  sessionId: string,
  agentSessionId: string | null,
  how: { exact?: boolean } = {},
): Promise<void> {
  if (agentSessionId === null || attempt.agent.importState === undefined) return;
  const state = await store.agentState(sessionId, stateField(attempt, agentSessionId));
  if (state !== null) await attempt.agent.importState(attempt.options, agentSessionId, state, how);
}

/**
 * After the attempt, whatever its end: the agent's state goes with the session's next write. Never throws.
 * → whether there was a state to save (the agent's conversation exists).
 */
export async function exportAgentState(
  attempt: AgentAttempt,
  writer: SessionWriter,
  agentSessionId: string | null,
  warn: WarnLog,
): Promise<boolean> {
  if (agentSessionId === null || attempt.agent.exportState === undefined) return false;
  const state = await attempt.agent.exportState(attempt.options, agentSessionId).catch((error: unknown) => {
    warn("the agent's state was not carried out (its next attempt starts without it)", error, {
      agent: attempt.agentName,
    });
    return null;
  });
  if (state !== null) writer.agentState(stateField(attempt, agentSessionId), state);
  return state !== null;
}
