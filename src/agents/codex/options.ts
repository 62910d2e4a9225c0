import { z } from 'zod';
import { ATTEMPT_DEFAULTS } from '../../config/defaults.ts';

/**
 * Codex's sandbox for the shell commands the model runs (`sandbox_mode`), an explicit choice:
 * - `read-only` (default): commands may read anything, write nothing, and have no network. A denied
 *   write fails inside the sandbox ("Read-only file system"); Codex 0.171 then prints no
 *   `command_execution` item for it, so such a call never shows up as a tool message.
 * - `workspace-write`: writes allowed in the cwd and in the temp dirs (Codex's defaults for this mode:
 *   a write under /tmp outside the cwd was allowed, measured), no network.
 * - `danger-full-access`: no sandbox at all. Only for hosts that are sandboxes themselves.
 * `codex exec` never asks for approval in any mode. The mode is passed on every run, a resume
 * included: a resumed thread does not keep the mode it ran with before.
 */
export const CODEX_SANDBOX_MODES = ['read-only', 'workspace-write', 'danger-full-access'] as const;
export type CodexSandboxMode = (typeof CODEX_SANDBOX_MODES)[number];

/** Codex thread ids are UUIDs (v7). */
const THREAD_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const SessionSchema = z.discriminatedUnion('mode', [
  z.object({ mode: z.literal('new') }),
  z.object({ mode: z.literal('resume'), id: z.string().regex(THREAD_ID, 'must be a Codex thread id (a UUID)') }),
  /** `--ephemeral`: Codex keeps no rollout file, the thread cannot be resumed. */
  z.object({ mode: z.literal('none') }),
]);

const httpUrl = z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' });

/**
 * One attempt of `codex exec`. Contract: there are no retry fields here, on purpose — the session
 * machine is the only retry owner, and Codex's own retries are always forced to 0 (see provider-config.ts).
 *
 * The model provider is, in this order: `baseUrl` (sessiond defines a Responses provider for it), or
 * `provider` (a `[model_providers.<id>]` table of the user's config.toml), or the `model_provider`
 * the user's config.toml selects. Codex's built-in providers (`openai`, `ollama`, `lmstudio`) are
 * refused: Codex does not let anyone change their retries. For OpenAI itself use
 * `baseUrl: 'https://api.openai.com/v1', envKey: 'OPENAI_API_KEY'`.
 */
export const CodexOptionsSchema = z
  .strictObject({
    prompt: z.string().refine((p) => p.trim() !== '', 'must not be empty'),
    cwd: z.string().min(1).optional(),
    /** `-m`: a model slug Codex knows (an unknown one works but Codex warns that it has no metadata for it). */
    model: z.string().min(1).optional(),
    /** The id of a custom model provider in the user's config.toml. */
    provider: z
      .string()
      .regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be a provider id (letters, digits, _ and -)')
      .optional(),
    /** Base URL of an OpenAI Responses API (`…/v1`): sessiond defines the provider itself. */
    baseUrl: httpUrl.optional(),
    /** With `baseUrl`: the environment variable holding the API key, sent as a Bearer token. */
    envKey: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'must be an environment variable name')
      .optional(),
    sandbox: z.enum(CODEX_SANDBOX_MODES).default('read-only'),
    session: SessionSchema.default({ mode: 'new' }),
    /** The user's CODEX_HOME to take config.toml and auth from (default: $CODEX_HOME or ~/.codex). Never written to. */
    codexHome: z.string().min(1).optional(),
    extraArgs: z.array(z.string()).default([]),
    env: z.record(z.string(), z.string()).default({}),
    /** No output line for this long stops the attempt as a `timeout` failure. */
    idleTimeoutMs: z.number().int().min(1000).max(86_400_000).default(ATTEMPT_DEFAULTS.idleTimeoutMs),
    /** The codex executable: a path, or a name looked up on PATH and in node_modules/.bin. */
    command: z.string().min(1).default('codex'),
  })
  .refine((o) => o.provider === undefined || o.baseUrl === undefined, {
    message: 'give either provider or baseUrl, not both',
    path: ['provider'],
  })
  .refine((o) => o.envKey === undefined || o.baseUrl !== undefined, {
    message: 'envKey goes with baseUrl',
    path: ['envKey'],
  });

export type CodexOptionsInput = z.input<typeof CodexOptionsSchema>;
export type CodexOptions = z.output<typeof CodexOptionsSchema>;

/** A TOML basic string: JSON's escapes (`\"`, `\\`, `\n`, `\uXXXX`) are all valid TOML. */
export function tomlString(value: string): string {
  return JSON.stringify(value);
}

/**
 * Codex's argv for one attempt, `providerArgs` being the `-c` overrides that pick the model
 * provider and switch its retries off. The prompt is not here: it is the `-` argument, read from
 * stdin (see provider.ts), so no prompt text can be taken for a flag.
 */
export function codexArgs(options: CodexOptions, providerArgs: readonly string[]): string[] {
  const args = options.session.mode === 'resume' ? ['exec', 'resume'] : ['exec'];
  args.push('--json', '--skip-git-repo-check');
  // `exec resume` has no --sandbox flag: the config override works for both.
  args.push('-c', `sandbox_mode=${tomlString(options.sandbox)}`);
  args.push(...providerArgs);
  if (options.model !== undefined) args.push('-m', options.model);
  if (options.session.mode === 'none') args.push('--ephemeral');
  args.push(...options.extraArgs);
  if (options.session.mode === 'resume') args.push(options.session.id);
  args.push('-');
  return args;
}

export function formatOptionErrors(error: z.ZodError): string {
  return error.issues.map((issue) => `${issue.path.join('.') || 'options'}: ${issue.message}`).join('; ');
}
