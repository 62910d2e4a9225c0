import { z } from 'zod';
import { THINKING_LEVELS } from '../agents/pi/options.ts';
import { AGENT_NAMES } from '../agents/registry.ts';

/**
 * What a caller of `enqueue` may choose per session or per prompt. What runs
 * on the worker's host (the agent's executable, its environment, extra argv,
 * the agent and session dirs) is the worker's configuration, never a caller's.
 */
export const TurnOptionsSchema = z.strictObject({
  agent: z.enum(AGENT_NAMES as [string, ...string[]]).optional(),
  cwd: z.string().min(1).max(4096).optional(),
  /** The pi agent dir on the worker's host to take models and auth from. */
  agentDir: z.string().min(1).max(4096).optional(),
  provider: z.string().min(1).max(200).optional(),
  model: z.string().min(1).max(200).optional(),
  thinking: z.enum(THINKING_LEVELS).optional(),
  tools: z.array(z.string().regex(/^[\w.-]+$/, 'must be a tool name')).max(100).optional(),
  idleTimeoutMs: z.number().int().min(1000).max(86_400_000).optional(),
});

export type TurnOptions = z.infer<typeof TurnOptionsSchema>;
