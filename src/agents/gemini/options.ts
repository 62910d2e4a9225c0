import { z } from 'zod';
import { ATTEMPT_DEFAULTS } from '../../config/defaults.ts';

/**
 * What gemini may do without asking, in headless mode (there is nobody to ask):
 * - `default`: tools that would need approval are not offered to the model at all. Measured on
 *   0.61.0: `run_shell_command`, `write_file`, `replace` and `web_fetch` are left out of the
 *   request's tool list; a call to one of them ends as a `tool_result` error `tool_not_registered`
 *   (a `tool.failed`), and the turn goes on. Read-only tools (`read_file`, `list_directory`,
 *   `glob`, `grep_search`, `google_web_search`…) stay.
 * - `auto_edit`: file edits are allowed too (`write_file`, `replace`, `web_fetch`); still no shell.
 * - `yolo`: every tool runs without approval, the shell included (`--approval-mode yolo`).
 * The default is `default`, the least permissive: sessiond never picks `yolo` on its own.
 */
export const APPROVAL_MODES = ['default', 'auto_edit', 'yolo'] as const;
export type ApprovalMode = (typeof APPROVAL_MODES)[number];

/** gemini reads at most this much of stdin, where the prompt goes (more is truncated). */
export const MAX_PROMPT_BYTES = 8 * 1024 * 1024;

const SessionSchema = z.discriminatedUnion('mode', [
  z.object({ mode: z.literal('new') }),
  z.object({ mode: z.literal('resume'), id: z.uuid({ error: 'must be a gemini session id (a UUID)' }) }),
]);

/**
 * One attempt of the Gemini CLI (0.61). Contract: there are no retry fields here, on purpose —
 * the session machine is the only retry owner; gemini's own retries are switched off in the
 * managed settings (`general.maxAttempts: 1`).
 */
export const GeminiOptionsSchema = z.strictObject({
  prompt: z
    .string()
    .refine((p) => p.trim() !== '', 'must not be empty')
    .refine(
      (p) => Buffer.byteLength(p, 'utf8') <= MAX_PROMPT_BYTES,
      `must be at most ${MAX_PROMPT_BYTES} bytes (gemini reads no more from stdin)`,
    ),
  cwd: z.string().min(1).optional(),
  /**
   * Required and explicit: the `auto` router first asks a classifier model, and that call
   * retries on its own (5 attempts, ignoring `maxAttempts`).
   */
  model: z
    .string()
    .regex(/^[\w.-]+$/, 'must be a model id')
    .refine(
      (m) => m !== 'auto' && !m.startsWith('auto-'),
      'must be an explicit model: "auto" routing retries on its own',
    ),
  approvalMode: z.enum(APPROVAL_MODES).default('default'),
  session: SessionSchema.default({ mode: 'new' }),
  /** The user's gemini config dir to take settings.json, GEMINI.md, commands… from (default: $GEMINI_CLI_HOME/.gemini or ~/.gemini). */
  configDir: z.string().min(1).optional(),
  extraArgs: z.array(z.string()).default([]),
  /** Extra environment for gemini, e.g. GEMINI_API_KEY and GOOGLE_GEMINI_BASE_URL. */
  env: z.record(z.string(), z.string()).default({}),
  /** No output line for this long stops the attempt as a `timeout` failure. */
  idleTimeoutMs: z.number().int().min(1000).max(86_400_000).default(ATTEMPT_DEFAULTS.idleTimeoutMs),
  /** The gemini executable: a path, or a name looked up on PATH, in node_modules/.bin and agent-clis/node_modules/.bin. */
  command: z.string().min(1).default('gemini'),
});

export type GeminiOptionsInput = z.input<typeof GeminiOptionsSchema>;
export type GeminiOptions = z.output<typeof GeminiOptionsSchema>;

/**
 * gemini's argv for one attempt. The prompt is not here: it goes on stdin, which is then closed
 * (see provider.ts); with stdin not a TTY and no `-p`, gemini runs headless on exactly that text.
 */
export function geminiArgs(options: GeminiOptions): string[] {
  const args = [
    '--output-format',
    'stream-json',
    '--model',
    options.model,
    '--approval-mode',
    options.approvalMode,
    '--skip-trust',
  ];
  if (options.session.mode === 'resume') args.push('--resume', options.session.id);
  args.push(...options.extraArgs);
  return args;
}

export function formatOptionErrors(error: z.ZodError): string {
  return error.issues.map((issue) => `${issue.path.join('.') || 'options'}: ${issue.message}`).join('; ');
}
