import { registeredAgentNames } from '../agents/registry.ts';
import { ConfigError } from '../errors.ts';

/**
 * The agents a worker runs: `requested` (checked: each must be a registered agent or an `acp:` one of
 * `agentOptions`; a ConfigError names `field` otherwise), or by default every registered agent and the
 * `acp:` ones of `agentOptions`.
 */
export function offeredAgents(
  requested: readonly string[] | undefined,
  agentOptions: Readonly<Record<string, unknown>>,
  field: string,
): string[] {
  const known = [...registeredAgentNames(), ...Object.keys(agentOptions).filter((name) => name.startsWith('acp:'))];
  if (requested === undefined) return known;
  if (requested.length === 0) throw new ConfigError(`${field}: must name at least one agent`);
  for (const name of requested)
    if (typeof name !== 'string' || !known.includes(name))
      throw new ConfigError(
        `${field}: unknown agent ${JSON.stringify(name)} (this worker knows ${known.join(', ')}; an acp: agent needs its options in SESSIOND_AGENT_OPTIONS)`,
      );
  return [...new Set(requested)];
}
