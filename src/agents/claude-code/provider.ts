import { resolve } from 'node:path';
import type { CliMessage } from '../../protocol/index.ts';
import { resolveAgentCli } from '../shared/agent-env.ts';
import { runAgentAttempt, startupFailure, type RunContext } from '../shared/run-attempt.ts';
import { egressSpawn, envBrokeredEnv, envModelRoute, withEgress, type EnvModelVars } from '../shared/brokered.ts';
import type { SpawnSpec } from '../../process/index.ts';
import { runClaudeCodeAsking } from './control.ts';
import { claudeConfigDir } from './session-file.ts';
import { ClaudeCodeMapper } from './mapper.ts';
import {
  claudeCodeArgs,
  claudeCodeEnv,
  ClaudeCodeOptionsSchema,
  formatOptionErrors,
  startupProblem,
  type ClaudeCodeOptions,
  type ClaudeCodeOptionsInput,
} from './options.ts';

/**
 * Claude Code 2.1.332 on SIGINT stops cleanly: while streaming it prints its `result`
 * (`error_during_execution`, `aborted_streaming`) and exits 0; during a tool it stops the tool
 * and ends the same way (`aborted_tools`). On SIGTERM during a tool it kills the tool and goes
 * on to the next model request (2.1.197 even finished the turn). Tools run in their own sessions
 * (setsid), out of reach of any signal to Claude Code's group: the tree kill that follows the
 * interrupt, by marker, is what guarantees that nothing survives.
 */
export const CLAUDE_CODE_INTERRUPT_SIGNAL: NodeJS.Signals = 'SIGINT';

export type { RunContext } from '../shared/run-attempt.ts';

/**
 * Exactly one attempt of Claude Code.
 * Contract: yields the attempt's messages and ends with exactly one terminal message; never
 * throws for anything the agent or its environment does (a failure to start is a
 * `terminal.failed` of category `startup`). When the caller's signal aborts, the process tree
 * is stopped on its own deadline and then the iterator rejects with the caller's abort reason;
 * messages already yielded stay delivered. No retry here, ever (Claude Code's own are off).
 */
export async function* runClaudeCode(
  input: ClaudeCodeOptionsInput,
  context: RunContext = {},
): AsyncGenerator<CliMessage, void, undefined> {
  context.signal?.throwIfAborted();
  const parsed = ClaudeCodeOptionsSchema.safeParse(input);
  const resumeSessionId = parsed.success && parsed.data.session.mode === 'resume' ? parsed.data.session.id : undefined;
  const persistsSession = !parsed.success || parsed.data.session.mode !== 'none';
  const mapper = new ClaudeCodeMapper({
    persistsSession,
    ...(resumeSessionId === undefined ? {} : { resumeSessionId }),
  });

  if (!parsed.success) {
    yield* startupFailure(mapper, `invalid claude-code options: ${formatOptionErrors(parsed.error)}`);
    return;
  }
  const options = parsed.data;
  // Named explicitly: in a sandbox HOME is the attempt's own, and sessiond finds the session files here.
  const configDir = claudeConfigDir(options);
  const ownEnv: Record<string, string> = { ...claudeCodeEnv(options), CLAUDE_CONFIG_DIR: configDir };
  const problem = startupProblem(options, ownEnv);
  if (problem !== null) {
    yield* startupFailure(mapper, problem);
    return;
  }
  // Brokered: Claude Code talks to the worker's model bridge (ANTHROPIC_BASE_URL) with a placeholder
  // in the variable that held the key (x-api-key for ANTHROPIC_API_KEY, Bearer for ANTHROPIC_AUTH_TOKEN).
  const model = envModelRoute(ownEnv, CLAUDE_MODEL_VARS);
  yield* withEgress(context, model.route, mapper, (egress) => {
    const spawnEgress = egressSpawn(egress, (reached) => ({
      env: envBrokeredEnv(ownEnv, reached, CLAUDE_MODEL_VARS, model, egress?.placeholderKey ?? ''),
    }));
    return runClaudeCodeProcess(options, ownEnv, configDir, spawnEgress, mapper, context);
  });
}

/** Where Claude Code sends its model requests without ANTHROPIC_BASE_URL. */
export const ANTHROPIC_API = 'https://api.anthropic.com';

const CLAUDE_MODEL_VARS: EnvModelVars = {
  baseUrl: 'ANTHROPIC_BASE_URL',
  defaultBaseUrl: ANTHROPIC_API,
  keys: ['ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN'],
};

async function* runClaudeCodeProcess(
  options: ClaudeCodeOptions,
  env: Record<string, string>,
  configDir: string,
  spawnEgress: Pick<SpawnSpec, 'bridges' | 'finalize'>,
  mapper: ClaudeCodeMapper,
  context: RunContext,
): AsyncGenerator<CliMessage, void, undefined> {
  const command = await resolveAgentCli(options.command, env);
  const cwd = options.cwd === undefined ? {} : { cwd: resolve(options.cwd) };
  // Its config dir holds its settings and every session's transcript: read-write, whole (see docs/sandbox.md).
  const sandbox = { writable: [configDir] };
  if (options.permissionPrompts === 'ask' && context.approvals !== undefined) {
    // Its permission prompts go to the attempt's approval gate over the stream-json control protocol.
    const spec = {
      command,
      args: claudeCodeArgs(options),
      ...cwd,
      env,
      sandbox,
      ...spawnEgress,
      interruptSignal: CLAUDE_CODE_INTERRUPT_SIGNAL,
      idleTimeoutMs: options.idleTimeoutMs,
    };
    yield* runClaudeCodeAsking(spec, options.prompt, mapper, context.approvals, context);
    return;
  }
  yield* runAgentAttempt(
    {
      command,
      // Nobody to ask outside the durable runtime: what would prompt is denied, as with `none`.
      args: claudeCodeArgs({ ...options, permissionPrompts: 'none' }),
      ...cwd,
      env,
      sandbox,
      ...spawnEgress,
      // The prompt travels on stdin, then stdin is closed: Claude Code reads it at EOF, and no
      // prompt text can be taken for one of its flags (FIXED_ENV also turns off `@file` expansion).
      input: options.prompt,
      interruptSignal: CLAUDE_CODE_INTERRUPT_SIGNAL,
      idleTimeoutMs: options.idleTimeoutMs,
    },
    mapper,
    context,
  );
}
