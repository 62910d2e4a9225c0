import type { CliMessage } from '../protocol/index.ts';
import { runPi, type RunContext } from './pi/provider.ts';
import { PiOptionsSchema, type PiOptionsInput } from './pi/options.ts';
import { exportPiSession, importPiSession, type PiSessionState } from './pi/session-file.ts';

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
 * An agent behind the shared contract. `exportState` / `importState` carry the
 * agent's own conversation state (e.g. pi's session file) between hosts as an
 * opaque string; both may be absent for an agent that keeps none locally.
 */
export interface AgentDefinition {
  run: AgentRun;
  exportState?(options: Readonly<Record<string, unknown>>, agentSessionId: string): Promise<string | null>;
  importState?(options: Readonly<Record<string, unknown>>, agentSessionId: string, state: string): Promise<void>;
}

function piSessionDir(options: Readonly<Record<string, unknown>>): string | null {
  return typeof options.sessionDir === 'string' ? options.sessionDir : null;
}

const pi: AgentDefinition = {
  run: (request, context) =>
    runPi(
      {
        ...(request.options as Partial<PiOptionsInput>),
        prompt: request.text,
        session: request.resumeSessionId === null ? { mode: 'new' } : { mode: 'resume', id: request.resumeSessionId },
      },
      context,
    ),
  async exportState(options, agentSessionId) {
    const dir = piSessionDir(options);
    if (dir === null) return null;
    const state = await exportPiSession(dir, agentSessionId);
    return state === null ? null : JSON.stringify(state);
  },
  async importState(options, _agentSessionId, state) {
    const dir = piSessionDir(options);
    if (dir === null) return;
    const parsed = JSON.parse(state) as PiSessionState;
    await importPiSession(dir, parsed, typeof options.cwd === 'string' ? options.cwd : undefined);
  },
};

export const AGENTS = { pi } as const satisfies Record<string, AgentDefinition>;
export type AgentName = keyof typeof AGENTS;
export const AGENT_NAMES = Object.keys(AGENTS) as AgentName[];

export function isAgentName(name: string): name is AgentName {
  return Object.hasOwn(AGENTS, name);
}

export function agentDefinition(name: AgentName): AgentDefinition {
  return AGENTS[name];
}

export function agentRun(name: AgentName): AgentRun {
  return AGENTS[name].run;
}

/** The pi options schema, for callers that validate an agent's turn options ahead of time. */
export const AGENT_OPTION_SCHEMAS = { pi: PiOptionsSchema } as const;
