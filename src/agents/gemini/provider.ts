import { join, resolve } from 'node:path';
import type { CliMessage } from '../../protocol/index.ts';
import { agentEnv, resolveAgentCli } from '../shared/agent-env.ts';
import { managedHomeFiles } from '../shared/sandbox-files.ts';
import { runAgentAttempt, startupFailure, type RunContext } from '../shared/run-attempt.ts';
import { egressSpawn, envBrokeredEnv, envModelRoute, withEgress, type EnvModelVars } from '../shared/brokered.ts';
import type { SpawnSpec } from '../../process/index.ts';
import { managedGeminiHome, prepareManagedGeminiHome, userGeminiDir } from './home.ts';
import { GeminiMapper } from './mapper.ts';
import {
  formatOptionErrors,
  geminiArgs,
  GeminiOptionsSchema,
  type GeminiOptions,
  type GeminiOptionsInput,
} from './options.ts';
import { sessiondStateDir } from '../shared/managed-files.ts';

/**
 * With GEMINI_CLI_NO_RELAUNCH=true, gemini 0.61 exits 0 at once on SIGINT or SIGTERM, without a
 * `result` and without stopping its tools (they run in their own session, `setsid`). The tree
 * kill that follows finds them by the marker in their environment.
 */
export const GEMINI_INTERRUPT_SIGNAL: NodeJS.Signals = 'SIGTERM';

/** gemini's stderr carries a stack trace per error: keep only its tail. */
export const GEMINI_STDERR_TAIL_BYTES = 16 * 1024;

export type { RunContext } from '../shared/run-attempt.ts';

/**
 * gemini's environment, built explicitly on top of `agentEnv` (sessiond's own environment minus
 * its secrets, plus `options.env`, where GEMINI_API_KEY and GOOGLE_GEMINI_BASE_URL come from).
 */
export function geminiEnv(
  env: Record<string, string>,
  managedHome: string,
  explicitEnv: Readonly<Record<string, string>> = {},
): Record<string, string> {
  return {
    ...env,
    // gemini's dir is the managed one; HOME stays the user's, for the tools.
    GEMINI_CLI_HOME: managedHome,
    // The default launcher relaunches gemini as a child and ignores INT/TERM/HUP without forwarding them.
    GEMINI_CLI_NO_RELAUNCH: 'true',
    // gemini writes error reports (gemini-client-error-*.json) and shell scratch files there.
    TMPDIR:
      explicitEnv.TMPDIR !== undefined && explicitEnv.TMPDIR !== '' ? explicitEnv.TMPDIR : join(managedHome, 'tmp'),
  };
}

/**
 * Exactly one attempt of the Gemini CLI.
 * Contract: yields the attempt's messages and ends with exactly one terminal message; never
 * throws for anything the agent or its environment does (a failure to start is a
 * `terminal.failed` of category `startup`). When the caller's signal aborts, the process tree
 * is stopped on its own deadline and then the iterator rejects with the caller's abort reason;
 * messages already yielded stay delivered. No retry here, ever.
 */
export async function* runGemini(
  input: GeminiOptionsInput,
  context: RunContext = {},
): AsyncGenerator<CliMessage, void, undefined> {
  context.signal?.throwIfAborted();
  const parsed = GeminiOptionsSchema.safeParse(input);
  const resumeSessionId = parsed.success && parsed.data.session.mode === 'resume' ? parsed.data.session.id : undefined;
  const mapper = new GeminiMapper(resumeSessionId === undefined ? {} : { resumeSessionId });
  if (!parsed.success) {
    yield* startupFailure(mapper, `invalid gemini options: ${formatOptionErrors(parsed.error)}`);
    return;
  }
  const options = parsed.data;
  const ownEnv = agentEnv(options.env);
  // Brokered: gemini talks to the worker's model bridge (GOOGLE_GEMINI_BASE_URL) with a placeholder GEMINI_API_KEY (sent as x-goog-api-key).
  const model = envModelRoute(ownEnv, GEMINI_MODEL_VARS);
  yield* withEgress(context, model.route, mapper, (egress) => {
    const spawnEgress = egressSpawn(egress, (reached) => ({
      env: geminiEnv(
        envBrokeredEnv(ownEnv, reached, GEMINI_MODEL_VARS, model, egress?.placeholderKey ?? ''),
        managedGeminiHome(userGeminiDir(options.configDir, ownEnv), sessiondStateDir(ownEnv)),
        options.env,
      ),
    }));
    return runGeminiProcess(options, ownEnv, spawnEgress, mapper, context);
  });
}

/** Where gemini sends its model requests without GOOGLE_GEMINI_BASE_URL. */
export const GEMINI_API = 'https://generativelanguage.googleapis.com';

const GEMINI_MODEL_VARS: EnvModelVars = {
  baseUrl: 'GOOGLE_GEMINI_BASE_URL',
  defaultBaseUrl: GEMINI_API,
  keys: ['GEMINI_API_KEY', 'GOOGLE_API_KEY'],
};

async function* runGeminiProcess(
  options: GeminiOptions,
  env: Record<string, string>,
  spawnEgress: Pick<SpawnSpec, 'bridges' | 'finalize'>,
  mapper: GeminiMapper,
  context: RunContext,
): AsyncGenerator<CliMessage, void, undefined> {
  let home: string;
  try {
    home = await prepareManagedGeminiHome(userGeminiDir(options.configDir, env), sessiondStateDir(env));
  } catch (error) {
    yield* startupFailure(mapper, `cannot prepare gemini's home: ${(error as Error).message}`);
    return;
  }

  yield* runAgentAttempt(
    {
      command: await resolveAgentCli(options.command, env),
      args: geminiArgs(options),
      ...(options.cwd === undefined ? {} : { cwd: resolve(options.cwd) }),
      env: geminiEnv(env, home, options.env),
      // gemini keeps its chats and settings in its managed home (read-write); what that links, read-only.
      sandbox: await managedHomeFiles(home, { writable: true }),
      ...spawnEgress,
      // The prompt travels on stdin, then stdin is closed: gemini runs headless on exactly that
      // text (no `-p`), with no argv length limit and nothing in it taken for a flag.
      input: options.prompt,
      interruptSignal: GEMINI_INTERRUPT_SIGNAL,
      idleTimeoutMs: options.idleTimeoutMs,
      stderrTailBytes: GEMINI_STDERR_TAIL_BYTES,
    },
    mapper,
    context,
  );
}
