import { z } from 'zod';
import { DEFAULT_AGENT } from '../agents/default-agent.ts';
import { AGENT_NAMES, agentDefinition, isAgentName } from '../agents/registry.ts';

/**
 * What a caller of `enqueue` may choose per session or per prompt: the agent
 * (`options.agent`, default pi) and that agent's caller options (its
 * `callerOptions` schema). What runs on the worker's host (the agent's
 * executable, its environment, extra argv) is the worker's configuration,
 * never a caller's.
 */
export const TurnOptionsSchema = z.record(z.string(), z.unknown()).superRefine((value, ctx) => {
  const { agent = DEFAULT_AGENT, ...rest } = value;
  if (typeof agent !== 'string' || !isAgentName(agent)) {
    ctx.addIssue({
      code: 'custom',
      path: ['agent'],
      message: `must be one of ${AGENT_NAMES.join(', ')}, or acp:<name> (got ${JSON.stringify(agent)})`,
    });
    return;
  }
  const parsed = agentDefinition(agent).callerOptions.safeParse(rest);
  if (parsed.success) return;
  for (const issue of parsed.error.issues) {
    ctx.addIssue({ code: 'custom', path: issue.path as PropertyKey[], message: issue.message });
  }
});
