import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { CliMessage } from '../../protocol/index.ts';
import { agentEnv, resolveAgentCli } from '../shared/agent-env.ts';
import { managedHomeFiles } from '../shared/sandbox-files.ts';
import { runAgentAttempt, startupFailure, type RunContext } from '../shared/run-attempt.ts';
import { brokeredEnv, egressSpawn, modelRoute, withEgress } from '../shared/brokered.ts';
import type { AttemptEgress, ModelRoute } from '../../process/egress/index.ts';
import { prepareManagedCodexHome, userCodexHome } from './home.ts';
import { CodexMapper } from './mapper.ts';
import {
  codexArgs,
  CodexOptionsSchema,
  formatOptionErrors,
  type CodexOptions,
  type CodexOptionsInput,
} from './options.ts';
import { providerArgs } from './provider-config.ts';
import { sessiondStateDir } from '../shared/managed-files.ts';

/**
 * Measured with Codex 0.171 (through its Node launcher, which forwards INT/TERM/HUP to the binary on
 * Node 20): on SIGINT Codex aborts the turn, kills the running tool, records the abort in the
 * rollout and exits 1; on SIGTERM it exits 143 and leaves the tool's bash and sleep running (they are
 * in their own session). The tree kill that follows holds either way; SIGINT leaves the thread
 * cleanly resumable.
 */
export const CODEX_INTERRUPT_SIGNAL: NodeJS.Signals = 'SIGINT';

export type { RunContext } from '../shared/run-attempt.ts';

/**
 * Exactly one attempt of `codex exec`.
 * Contract: yields the attempt's messages and ends with exactly one terminal message; never throws
 * for anything the agent or its environment does (a failure to start is a `terminal.failed` of
 * category `startup`). When the caller's signal aborts, the process tree is stopped on its own
 * deadline and then the iterator rejects with the caller's abort reason; messages already yielded
 * stay delivered. No retry here, ever, and Codex's own retries are forced to 0.
 */
export async function* runCodex(
  input: CodexOptionsInput,
  context: RunContext = {},
): AsyncGenerator<CliMessage, void, undefined> {
  const { signal } = context;
  signal?.throwIfAborted();
  const parsed = CodexOptionsSchema.safeParse(input);
  const resumeSessionId = parsed.success && parsed.data.session.mode === 'resume' ? parsed.data.session.id : undefined;
  const persistsSession = !parsed.success || parsed.data.session.mode !== 'none';
  const mapper = new CodexMapper({ persistsSession, ...(resumeSessionId === undefined ? {} : { resumeSessionId }) });

  if (!parsed.success) {
    yield* startupFailure(mapper, `invalid codex options: ${formatOptionErrors(parsed.error)}`);
    return;
  }
  const options = parsed.data;
  const ownEnv = agentEnv(options.env);
  // Brokered only with a baseUrl provider (sessiond's own): the key is the value of its envKey.
  const route =
    options.baseUrl === undefined || options.envKey === undefined
      ? null
      : modelRoute(options.baseUrl, options.baseUrl, ownEnv[options.envKey]);
  yield* withEgress(context, route, mapper, (egress) =>
    runCodexProcess(options, ownEnv, egress, route, mapper, context),
  );
}

async function* runCodexProcess(
  options: CodexOptions,
  ownEnv: Record<string, string>,
  egress: AttemptEgress | null,
  route: ModelRoute | null,
  mapper: CodexMapper,
  context: RunContext,
): AsyncGenerator<CliMessage, void, undefined> {
  const env = ownEnv;
  let codexHome: string;
  let tmp: string;
  let provider: ReturnType<typeof providerArgs>;
  let userConfig: string | null = null;
  try {
    const home = await prepareManagedCodexHome(userCodexHome(options.codexHome, env), sessiondStateDir(env));
    codexHome = home.path;
    userConfig = home.userConfig;
    provider = providerArgs(options, userConfig);
    // Codex writes its sandbox helpers under $TMPDIR, and workspace-write lets tools write there: one per attempt.
    tmp = await mkdtemp(join(env.TMPDIR !== undefined && env.TMPDIR !== '' ? env.TMPDIR : tmpdir(), 'sessiond-codex-'));
  } catch (error) {
    yield* startupFailure(mapper, `cannot prepare CODEX_HOME: ${(error as Error).message}`);
    return;
  }
  if (!provider.ok) {
    // Best effort: the temporary folder is private to this attempt and the startup failure is what is reported.
    await rm(tmp, { recursive: true, force: true }).catch(() => undefined);
    yield* startupFailure(mapper, provider.error);
    return;
  }

  try {
    yield* runAgentAttempt(
      {
        command: await resolveAgentCli(options.command, env),
        args: codexArgs(options, provider.args),
        ...(options.cwd === undefined ? {} : { cwd: resolve(options.cwd) }),
        env: { ...env, CODEX_HOME: codexHome, TMPDIR: tmp },
        // Codex keeps its threads, state and logs in its managed home (read-write); what that links, read-only.
        sandbox: { ...(await managedHomeFiles(codexHome, { writable: true })), writable: [codexHome, tmp] },
        // Brokered: sessiond's provider points at the model bridge, its envKey variable holds the placeholder.
        ...egressSpawn(egress, (reached) => {
          const brokered = route !== null && reached.modelBaseUrl !== null && options.envKey !== undefined;
          const set =
            brokered && options.envKey !== undefined && egress !== null
              ? { [options.envKey]: egress.placeholderKey }
              : {};
          const final = providerArgs(
            brokered && reached.modelBaseUrl !== null ? { ...options, baseUrl: reached.modelBaseUrl } : options,
            userConfig,
          );
          if (!final.ok) throw new Error(final.error);
          return {
            args: codexArgs(options, final.args),
            env: { ...brokeredEnv(env, reached, route?.key ?? null, set), CODEX_HOME: codexHome, TMPDIR: tmp },
          };
        }),
        // The prompt is the `-` argument: Codex reads it from stdin, which is then closed (Codex
        // waits for EOF), so no prompt text can be taken for one of its flags.
        input: options.prompt,
        interruptSignal: CODEX_INTERRUPT_SIGNAL,
        idleTimeoutMs: options.idleTimeoutMs,
      },
      mapper,
      context,
    );
  } finally {
    // The tree is stopped by now (runAgentAttempt's own finally): nothing writes here any more.
    await rm(tmp, { recursive: true, force: true }).catch(() => undefined);
  }
}
