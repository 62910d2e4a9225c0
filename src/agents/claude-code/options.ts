import { tmpdir } from 'node:os';
import { resolve } from 'node:path';
import { z } from 'zod';
import { ATTEMPT_DEFAULTS } from '../../config/defaults.ts';
import { agentEnv } from '../shared/agent-env.ts';

/**
 * How Claude Code decides tool permissions in `-p` mode, where nobody can answer a
 * prompt (sessiond passes `--permission-prompts none`: whatever would ask is denied,
 * returned to the model as an error `tool_result` and listed in `result.permission_denials`):
 * - `default`: read-only tools and read-only shell commands (`echo`, `ls`) run; edits and
 *   other commands are denied unless `allowedTools` allows them. The default here.
 * - `acceptEdits`: file edits and file-system shell commands (`touch`, `mkdir`) in the
 *   working directories run too.
 * - `dontAsk`: only what `allowedTools` allows runs; everything else is denied.
 * - `plan`: nothing that changes anything runs.
 * - `bypassPermissions`: everything runs, unchecked. Claude Code refuses it as root unless
 *   `IS_SANDBOX=1` is in its environment; sessiond never sets that itself: to declare the
 *   host a sandbox, put `IS_SANDBOX: "1"` in `env`. Without it a root run fails at once as a
 *   `startup` failure saying so.
 */
export const PERMISSION_MODES = ['default', 'acceptEdits', 'dontAsk', 'plan', 'bypassPermissions'] as const;
export type PermissionMode = (typeof PERMISSION_MODES)[number];

/**
 * Who answers what the permission mode leaves to a prompt (the operator's choice, in the host
 * configuration; a caller cannot set it):
 * - `none` (the default): nobody, it is denied (`--permission-prompts none`).
 * - `ask`: an operator, through the durable approvals (`approval.requested` / `approval.decided`,
 *   see src/runtime/approvals/): Claude Code runs with `--input-format stream-json
 *   --permission-prompt-tool stdio` and each prompt (a `can_use_tool` control request) waits for
 *   `sessiond approve` / `deny`, the API or the dashboard; the deployment policy's deadline denies,
 *   its `approvals.autoAllow` rules may allow at once (see control.ts). Without the durable runtime
 *   (`sessiond run`) nobody can be asked: it runs as `none`.
 */
export const PERMISSION_PROMPTS = ['none', 'ask'] as const;
export type PermissionPrompts = (typeof PERMISSION_PROMPTS)[number];

/** A Claude Code permission rule: a tool name, optionally with a specifier, e.g. `Edit`, `Bash(git log *)`, `mcp__srv__tool`. */
const TOOL_RULE = /^[A-Za-z_][\w-]*(\([^\n]*\))?$/;

const SESSION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const SessionSchema = z.discriminatedUnion('mode', [
  z.object({ mode: z.literal('new') }),
  z.object({
    mode: z.literal('resume'),
    id: z.string().regex(SESSION_ID, 'must be a Claude Code session id (a UUID)'),
  }),
  /** `--no-session-persistence`: nothing is saved, the session cannot be resumed. */
  z.object({ mode: z.literal('none') }),
]);

/**
 * One attempt of Claude Code. Contract: there are no retry fields here, on purpose —
 * the session machine is the only retry owner (Claude Code's own retries are switched off).
 */
export const ClaudeCodeOptionsSchema = z.strictObject({
  prompt: z.string().refine((p) => p.trim() !== '', 'must not be empty'),
  cwd: z.string().min(1).optional(),
  model: z.string().min(1).optional(),
  session: SessionSchema.default({ mode: 'new' }),
  permissionMode: z.enum(PERMISSION_MODES).default('default'),
  permissionPrompts: z.enum(PERMISSION_PROMPTS).default('none'),
  /** Rules that run without asking (`--allowedTools`), e.g. `["Bash(npm test *)", "Edit"]`. */
  allowedTools: z.array(z.string().regex(TOOL_RULE, 'must be a tool rule like Edit or Bash(git log *)')).default([]),
  /** Rules that are always denied (`--disallowedTools`). */
  disallowedTools: z.array(z.string().regex(TOOL_RULE, 'must be a tool rule like Edit or Bash(git log *)')).default([]),
  /** Stream text and thinking as deltas (`--include-partial-messages`); without it each block arrives whole. */
  includePartialMessages: z.boolean().default(true),
  /** Where Claude Code keeps its settings and session files (`CLAUDE_CONFIG_DIR`; default: $CLAUDE_CONFIG_DIR or ~/.claude). */
  configDir: z.string().min(1).optional(),
  /** Claude Code's temp dir (`TMPDIR`; it writes `$TMPDIR/claude-<uid>/`). Default: $TMPDIR or the system's. */
  tmpDir: z.string().min(1).optional(),
  extraArgs: z.array(z.string()).default([]),
  /** Added to the agent's environment, e.g. ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY, IS_SANDBOX. */
  env: z.record(z.string(), z.string()).default({}),
  /** No output line for this long stops the attempt as a `timeout` failure. */
  idleTimeoutMs: z.number().int().min(1000).max(86_400_000).default(ATTEMPT_DEFAULTS.idleTimeoutMs),
  /** The claude executable: a path, or a name looked up on PATH and in node_modules/.bin. */
  command: z.string().min(1).default('claude'),
});

export type ClaudeCodeOptionsInput = z.input<typeof ClaudeCodeOptionsSchema>;
export type ClaudeCodeOptions = z.output<typeof ClaudeCodeOptionsSchema>;

/**
 * Claude Code's argv for one attempt. The prompt is not here: it goes on stdin (see provider.ts),
 * as plain text, or with `permissionPrompts: "ask"` as a stream-json user message on a stdin that
 * stays open for the answers to its permission prompts (see control.ts).
 * `--allowedTools` is variadic: each rule is passed as `--allowedTools=<rule>` so that nothing
 * after it is taken for another rule (repeated flags add up).
 */
export function claudeCodeArgs(options: ClaudeCodeOptions): string[] {
  const asking = options.permissionPrompts === 'ask';
  const args = asking
    ? ['-p', '--input-format', 'stream-json', '--output-format', 'stream-json', '--verbose']
    : ['-p', '--output-format', 'stream-json', '--verbose'];
  if (options.includePartialMessages) args.push('--include-partial-messages');
  args.push('--permission-mode', options.permissionMode);
  if (asking) args.push('--permission-prompts', 'host', '--permission-prompt-tool', 'stdio');
  else args.push('--permission-prompts', 'none');
  for (const rule of options.allowedTools) args.push(`--allowedTools=${rule}`);
  for (const rule of options.disallowedTools) args.push(`--disallowedTools=${rule}`);
  if (options.model !== undefined) args.push('--model', options.model);
  if (options.session.mode === 'resume') args.push('--resume', options.session.id);
  if (options.session.mode === 'none') args.push('--no-session-persistence');
  args.push(...options.extraArgs);
  return args;
}

/**
 * Set last, whatever `env` says: one attempt means one model request per turn step
 * (no retries, no non-streaming second request after a dropped stream), no traffic
 * besides the model API, and the prompt reaches the model as given (no `@file` expansion,
 * which would read files outside the permission checks).
 */
export const FIXED_ENV = {
  CLAUDE_CODE_MAX_RETRIES: '0',
  CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK: '1',
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
  CLAUDE_CODE_DISABLE_FILE_MENTIONS: '1',
  DISABLE_AUTOUPDATER: '1',
  DISABLE_TELEMETRY: '1',
  DISABLE_ERROR_REPORTING: '1',
} as const;

/** Claude Code's environment: sessiond's own minus its secrets, `env` (ANTHROPIC_* and the like), TMPDIR, CLAUDE_CONFIG_DIR, then FIXED_ENV. */
export function claudeCodeEnv(
  options: ClaudeCodeOptions,
  base: NodeJS.ProcessEnv = process.env,
): Record<string, string> {
  const env = agentEnv(options.env, base);
  return {
    ...env,
    TMPDIR:
      options.tmpDir !== undefined
        ? resolve(options.tmpDir)
        : env.TMPDIR !== undefined && env.TMPDIR !== ''
          ? env.TMPDIR
          : tmpdir(),
    ...(options.configDir === undefined ? {} : { CLAUDE_CONFIG_DIR: resolve(options.configDir) }),
    ...FIXED_ENV,
  };
}

/** Why this run cannot start, decided before spawning (`null` when it can). */
export function startupProblem(
  options: ClaudeCodeOptions,
  env: Record<string, string>,
  uid: number | undefined = process.getuid?.(),
): string | null {
  if (options.permissionMode === 'bypassPermissions' && uid === 0 && env.IS_SANDBOX !== '1') {
    return 'permissionMode "bypassPermissions" is refused by Claude Code as root; set env IS_SANDBOX=1 only if this host is a sandbox, or choose another permissionMode (with allowedTools)';
  }
  return null;
}

export function formatOptionErrors(error: z.ZodError): string {
  return error.issues.map((issue) => `${issue.path.join('.') || 'options'}: ${issue.message}`).join('; ');
}
