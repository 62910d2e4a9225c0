import { randomUUID } from 'node:crypto';
import { agentDefinition, isAgentName } from '../../agents/registry.ts';

/**
 * `import --as` a new id makes a copy of a session, and the copy must not share the original's
 * agent conversation: on one host both would resume (and append to) the same conversation file.
 * A plain import whose agent session another session of the deployment uses is forked the same
 * way (transfer.ts): an archive never reaches another session's conversation.
 * So the copy gets an agent session id of its own, and its stored agent state is rewritten for it
 * by the agent's `forkState` (pi: the file's name and header). An agent without one (or a state it
 * cannot read) makes the copy start a new agent conversation instead; the transcript is kept either way.
 */
export interface ForkedConversation {
  agentSessionId: string | null;
  agent: Array<[string, string]>;
  /** `kept`: no agent conversation to fork; `forked`: continued under a new id; `new`: the next turn starts a new one. */
  conversation: 'kept' | 'forked' | 'new';
}

export function forkConversation(
  agentSessionId: string | null,
  agent: ReadonlyArray<readonly [string, string]>,
  newId: () => string = randomUUID,
): ForkedConversation {
  if (agentSessionId === null)
    return { agentSessionId: null, agent: [], conversation: agent.length === 0 ? 'kept' : 'new' };
  const to = newId();
  const forked: Array<[string, string]> = [];
  for (const [field, state] of agent) {
    if (!field.endsWith(`:${agentSessionId}`)) continue;
    const name = field.slice(0, field.length - agentSessionId.length - 1);
    if (!isAgentName(name)) continue;
    const fork = agentDefinition(name).forkState;
    if (fork === undefined) continue;
    try {
      forked.push([`${name}:${to}`, fork(state, agentSessionId, to)]);
    } catch {
      // A state this agent cannot read: no conversation to continue.
    }
  }
  return forked.length === 0
    ? { agentSessionId: null, agent: [], conversation: 'new' }
    : { agentSessionId: to, agent: forked, conversation: 'forked' };
}
