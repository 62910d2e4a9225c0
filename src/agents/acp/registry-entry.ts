import type { PermissionKnobs } from '../../policy/knobs.ts';
import { acpAgent } from './definition.ts';
import { ACP_NAME, ACP_PREFIX } from './options.ts';

export { acpAgent };

/** `acp:<name>`: one of the operator's ACP agents (whether this host configures it is the worker's to say). */
export function acpAgentName(name: string): name is `acp:${string}` {
  return name.startsWith(ACP_PREFIX) && ACP_NAME.test(name.slice(ACP_PREFIX.length));
}

/** The permission knobs of each configured `acp:<name>` (all the same: the generic ACP agent's). */
export function acpPermissions(configured: readonly string[]): Record<string, PermissionKnobs> {
  return Object.fromEntries(configured.filter(acpAgentName).map((name) => [name, acpAgent.permissions]));
}
