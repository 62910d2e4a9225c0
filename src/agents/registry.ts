import type { PermissionKnobs } from '../policy/knobs.ts';
import type { AgentDefinition, AgentRun } from './agent-definition.ts';
import { claudeCode } from './claude-code/definition.ts';
import { gemini } from './gemini/definition.ts';
import { codex } from './codex/definition.ts';
import { pi } from './pi/definition.ts';

export type { AgentDefinition, AgentRequest, AgentRun } from './agent-definition.ts';

/** Every agent by name: adding one is a folder under src/agents/ and one line here. */
export const AGENTS = {
  'claude-code': claudeCode,
  gemini,
  codex,
  pi,
} as const satisfies Record<string, AgentDefinition>;

export type AgentName = keyof typeof AGENTS;
export const AGENT_NAMES = Object.keys(AGENTS) as AgentName[];

/** What each agent declares about its privileges, for the deployment policy. */
export const AGENT_PERMISSIONS: Readonly<Record<string, PermissionKnobs>> = Object.fromEntries(AGENT_NAMES.map((name) => [name, AGENTS[name].permissions]));

export function isAgentName(name: string): name is AgentName {
  return Object.hasOwn(AGENTS, name);
}

export function agentDefinition(name: AgentName): AgentDefinition {
  return AGENTS[name];
}

export function agentRun(name: AgentName): AgentRun {
  return AGENTS[name].run;
}
