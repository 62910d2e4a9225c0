import type { PermissionKnobs } from '../policy/knobs.ts';
import type { AgentDefinition, AgentRun } from './agent-definition.ts';
import { claudeCode } from './claude-code/definition.ts';
import { gemini } from './gemini/definition.ts';
import { codex } from './codex/definition.ts';
import { pi } from './pi/definition.ts';
import { acpAgent, acpAgentName, acpPermissions } from './acp/registry-entry.ts';

export type { AgentDefinition, AgentRequest, AgentRun } from './agent-definition.ts';

/** Every agent by name: adding one is a folder under src/agents/ and one line here. */
export const AGENTS = {
  'claude-code': claudeCode,
  gemini,
  codex,
  pi,
} as const satisfies Record<string, AgentDefinition>;

export type AgentName = keyof typeof AGENTS;
/** A registry agent or one of the operator's ACP agents. */
export type AnyAgentName = AgentName | `acp:${string}`;
export const AGENT_NAMES = Object.keys(AGENTS) as AgentName[];

/** What each agent declares about its privileges, for the deployment policy. */
export const AGENT_PERMISSIONS: Readonly<Record<string, PermissionKnobs>> = Object.fromEntries(AGENT_NAMES.map((name) => [name, AGENTS[name].permissions]));

/** The registry's agents and the operator's ACP agents (`acp:<name>` keys of its agent options), for the deployment policy. */
export function agentPermissions(configured: readonly string[] = []): Readonly<Record<string, PermissionKnobs>> {
  return { ...AGENT_PERMISSIONS, ...acpPermissions(configured) };
}

export function isAgentName(name: string): name is AnyAgentName {
  return Object.hasOwn(AGENTS, name) || acpAgentName(name);
}

export function agentDefinition(name: AnyAgentName): AgentDefinition {
  return acpAgentName(name) ? acpAgent : AGENTS[name as AgentName];
}

export function agentRun(name: AnyAgentName): AgentRun {
  return agentDefinition(name).run;
}
