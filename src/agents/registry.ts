import type { CliMessage } from '../protocol/index.ts';
import { runPi, type RunContext } from './pi/provider.ts';
import type { PiOptionsInput } from './pi/options.ts';

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

const runPiRequest: AgentRun = (request, context) =>
  runPi(
    {
      ...(request.options as Partial<PiOptionsInput>),
      prompt: request.text,
      session: request.resumeSessionId === null ? { mode: 'new' } : { mode: 'resume', id: request.resumeSessionId },
    },
    context,
  );

export const AGENTS = { pi: runPiRequest } as const satisfies Record<string, AgentRun>;
export type AgentName = keyof typeof AGENTS;

export function isAgentName(name: string): name is AgentName {
  return Object.hasOwn(AGENTS, name);
}

export function agentRun(name: AgentName): AgentRun {
  return AGENTS[name];
}
