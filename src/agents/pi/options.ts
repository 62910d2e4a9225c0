import { z } from 'zod';
import { ATTEMPT_DEFAULTS } from '../../config/defaults.ts';

import { THINKING_LEVELS } from './thinking-levels.ts';

export { THINKING_LEVELS };

const SessionSchema = z.discriminatedUnion('mode', [
  z.object({ mode: z.literal('new') }),
  z.object({
    mode: z.literal('resume'),
    id: z.string().regex(/^[A-Za-z0-9-]{4,64}$/, 'must be a pi session id (letters, digits, dashes)'),
  }),
  z.object({ mode: z.literal('none') }),
]);

/**
 * One attempt of pi. Contract: there are no retry fields here, on purpose —
 * the session machine is the only retry owner.
 */
export const PiOptionsSchema = z.strictObject({
  prompt: z.string().refine((p) => p.trim() !== '', 'must not be empty'),
  cwd: z.string().min(1).optional(),
  provider: z.string().min(1).optional(),
  model: z.string().min(1).optional(),
  thinking: z.enum(THINKING_LEVELS).optional(),
  session: SessionSchema.default({ mode: 'new' }),
  /** Where pi keeps its session files (`--session-dir`). */
  sessionDir: z.string().min(1).optional(),
  /** The user's pi agent dir to take models, auth and settings from (default: $PI_CODING_AGENT_DIR or ~/.pi/agent). */
  agentDir: z.string().min(1).optional(),
  /** Allowlist of pi tools (`--tools`). */
  tools: z.array(z.string().regex(/^[\w.-]+$/, 'must be a tool name')).optional(),
  /** Extension discovery (`<cwd>/.pi/extensions`, `<agentDir>/extensions`): code of the working directory. false: `--no-extensions`. */
  extensions: z.boolean().default(true),
  extraArgs: z.array(z.string()).default([]),
  env: z.record(z.string(), z.string()).default({}),
  /** No output line for this long stops the attempt as a `timeout` failure. */
  idleTimeoutMs: z.number().int().min(1000).max(86_400_000).default(ATTEMPT_DEFAULTS.idleTimeoutMs),
  /** The pi executable: a path, or a name looked up on PATH and in node_modules/.bin. */
  command: z.string().min(1).default('pi'),
});

export type PiOptionsInput = z.input<typeof PiOptionsSchema>;
export type PiOptions = z.output<typeof PiOptionsSchema>;

/** pi's argv for one attempt (rpc mode). The prompt is not here: it goes on stdin as a command (see rpc.ts). */
export function piArgs(options: PiOptions): string[] {
  const args = ['--mode', 'rpc'];
  if (options.provider !== undefined) args.push('--provider', options.provider);
  if (options.model !== undefined) args.push('--model', options.model);
  if (options.thinking !== undefined) args.push('--thinking', options.thinking);
  if (options.tools !== undefined) args.push('--tools', options.tools.join(','));
  if (options.session.mode === 'none') args.push('--no-session');
  if (options.session.mode === 'resume') args.push('--session', options.session.id);
  if (options.session.mode !== 'none' && options.sessionDir !== undefined)
    args.push('--session-dir', options.sessionDir);
  if (!options.extensions) args.push('--no-extensions');
  args.push(...options.extraArgs);
  return args;
}

export function formatOptionErrors(error: z.ZodError): string {
  return error.issues.map((issue) => `${issue.path.join('.') || 'options'}: ${issue.message}`).join('; ');
}
