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

/**
 * Agents a library user added (`defineAgent`, passed to `createWorker` / `createClient`), by name.
 * Process-wide, like the built-in ones: a name is registered once, and never over a built-in one.
 */
const ADDED = new Map<string, AgentDefinition>();

/** Adds an agent under `name`; the same definition again is a no-op. Throws for a built-in or an `acp:` name, or a name taken by another definition. */
export function registerAgent(name: string, definition: AgentDefinition): void {
  if (Object.hasOwn(AGENTS, name) || acpAgentName(name)) throw new Error(`agent name "${name}" is a built-in agent's`);
  const known = ADDED.get(name);
  if (known !== undefined && known !== definition)
    throw new Error(`agent name "${name}" is already registered with another definition`);
  ADDED.set(name, definition);
}

/** The built-in agents and those a library user added, by name (what a worker can run, acp ones aside). */
export function registeredAgentNames(): string[] {
  return [...AGENT_NAMES, ...ADDED.keys()];
}

/** What each agent declares about its privileges, for the deployment policy. */
export const AGENT_PERMISSIONS: Readonly<Record<string, PermissionKnobs>> = Object.fromEntries(
  AGENT_NAMES.map((name) => [name, AGENTS[name].permissions]),
);

/** The registry's agents and the operator's ACP agents (`acp:<name>` keys of its agent options), for the deployment policy. */
export function agentPermissions(configured: readonly string[] = []): Readonly<Record<string, PermissionKnobs>> {
  return {
    ...AGENT_PERMISSIONS,
    ...Object.fromEntries([...ADDED].map(([name, d]) => [name, d.permissions])),
    ...acpPermissions(configured),
  };
}

export function isAgentName(name: string): name is AnyAgentName {
  return Object.hasOwn(AGENTS, name) || acpAgentName(name) || ADDED.has(name);
}

export function agentDefinition(name: AnyAgentName): AgentDefinition {
  return acpAgentName(name) ? acpAgent : (ADDED.get(name) ?? AGENTS[name as AgentName]);
}

export function agentRun(name: AnyAgentName): AgentRun {
  return agentDefinition(name).run;
}
