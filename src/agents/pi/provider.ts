import { join, resolve } from 'node:path';
import type { CliMessage } from '../../protocol/index.ts';
import type { SandboxFiles } from '../../process/index.ts';
import { startupFailure, type RunContext } from '../shared/run-attempt.ts';
import { agentEnv, resolveCommand } from '../shared/agent-env.ts';
import { brokeredEnv, egressSpawn, openEgress } from '../shared/brokered.ts';
import type { SpawnSpec } from '../../process/index.ts';
import type { AttemptEgress } from '../../process/egress/index.ts';
import { brokeredAgentDir, piModelRoute, writeModels } from './brokered-agent-dir.ts';
import { ensureDir, managedHomeFiles } from '../shared/sandbox-files.ts';
import { prepareManagedAgentDir, userAgentDir } from './home.ts';
import { PiMapper } from './mapper.ts';
import { runPiRpc } from './rpc.ts';
import { formatOptionErrors, piArgs, PiOptionsSchema, type PiOptions, type PiOptionsInput } from './options.ts';
import { sessiondStateDir } from '../shared/managed-files.ts';

/**
 * pi 0.73 dies at once on SIGINT and leaves its bash tool processes running;
 * on SIGTERM it kills them first. The tree kill that follows holds either way.
 */
export const PI_INTERRUPT_SIGNAL: NodeJS.Signals = 'SIGTERM';

export type { RunContext } from '../shared/run-attempt.ts';

/**
 * Exactly one attempt of pi.
 * Contract: yields the attempt's messages and ends with exactly one terminal
 * message; never throws for anything the agent or its environment does (a
 * failure to start is a `terminal.failed` of category `startup`). When the
 * caller's signal aborts, the process tree is stopped on its own deadline and
 * then the iterator rejects with the caller's abort reason; messages already
 * yielded stay delivered. No retry here, ever.
 */
export async function* runPi(
  input: PiOptionsInput,
  context: RunContext = {},
): AsyncGenerator<CliMessage, void, undefined> {
  const { signal } = context;
  signal?.throwIfAborted();
  const parsed = PiOptionsSchema.safeParse(input);
  const resumeSessionId = parsed.success && parsed.data.session.mode === 'resume' ? parsed.data.session.id : undefined;
  const persistsSession = !parsed.success || parsed.data.session.mode !== 'none';
  const mapper = new PiMapper({ persistsSession, ...(resumeSessionId === undefined ? {} : { resumeSessionId }) });

  if (!parsed.success) {
    yield* startupFailure(mapper, `invalid pi options: ${formatOptionErrors(parsed.error)}`);
    return;
  }
  const options = parsed.data;
  const ownEnv = agentEnv(options.env);
  let managedDir: string;
  try {
    managedDir = await prepareManagedAgentDir(userAgentDir(options.agentDir, ownEnv), sessiondStateDir(ownEnv));
  } catch (error) {
    yield* startupFailure(mapper, `cannot prepare pi's agent dir: ${(error as Error).message}`);
    return;
  }
  const route = context.egress === undefined ? null : await piModelRoute(managedDir, options.provider, ownEnv);
  let egress: AttemptEgress | null = null;
  let attemptDir: Awaited<ReturnType<typeof brokeredAgentDir>> | null = null;
  try {
    egress = await openEgress(context, route);
    if (egress !== null)
      attemptDir = await brokeredAgentDir(managedDir, join(sessiondStateDir(ownEnv), 'pi-attempts'), route !== null);
  } catch (error) {
    await egress?.close();
    yield* startupFailure(mapper, `cannot open the attempt's egress: ${(error as Error).message}`);
    return;
  }
  const dir = attemptDir?.dir ?? managedDir;
  const spawnEgress = egressSpawn(egress, async (reached) => {
    await writeModels(managedDir, dir, options.provider, reached.modelBaseUrl, egress?.placeholderKey ?? '');
    return { env: { ...brokeredEnv(ownEnv, reached, route?.key ?? null), PI_CODING_AGENT_DIR: dir } };
  });
  try {
    yield* runPiProcess(options, ownEnv, dir, spawnEgress, mapper, context);
  } finally {
    // Side by side: on the path of every attempt's end (a cancel's final state waits for it).
    await Promise.all([egress?.close(), attemptDir?.cleanup()]);
  }
}

async function* runPiProcess(
  options: PiOptions,
  env: Record<string, string>,
  agentDir: string,
  spawnEgress: Pick<SpawnSpec, 'bridges' | 'finalize'>,
  mapper: PiMapper,
  context: RunContext,
): AsyncGenerator<CliMessage, void, undefined> {
  const cwd = options.cwd === undefined ? undefined : resolve(options.cwd);
  yield* runPiRpc(
    {
      command: await resolveCommand(options.command, env),
      args: piArgs(options),
      ...(cwd === undefined ? {} : { cwd }),
      env: { ...env, PI_CODING_AGENT_DIR: agentDir },
      sandbox: await piSandboxFiles(agentDir, options.session.mode === 'none' ? undefined : options.sessionDir, cwd),
      ...spawnEgress,
      interruptSignal: PI_INTERRUPT_SIGNAL,
      idleTimeoutMs: options.idleTimeoutMs,
    },
    // The prompt travels on stdin as an rpc command: no prompt text can be taken for one of pi's
    // flags or `@file` arguments.
    options.prompt,
    mapper,
    context,
  );
}

/**
 * What pi's sandbox shows of its files: the managed agent dir and what it links (models, auth,
 * themes…) read-only, and only this cwd's session dir read-write (pi keeps `sessions/--<cwd>--/`,
 * or the operator's `sessionDir`), never the other cwds' conversations.
 */
export async function piSandboxFiles(
  agentDir: string,
  sessionDir: string | undefined,
  cwd: string | undefined,
): Promise<SandboxFiles> {
  const files = await managedHomeFiles(agentDir, { writable: false, skip: ['sessions'] });
  const made = await ensureDir(
    sessionDir !== undefined ? resolve(sessionDir) : join(agentDir, 'sessions', piCwdDirName(cwd ?? process.cwd())),
  );
  return { ...files, writable: made === null ? [] : [made] };
}

/** pi's name for a cwd's session dir: `--<path with / \\ : as ->--`. */
export function piCwdDirName(cwd: string): string {
  return `--${cwd.replace(/^[/\\]/, '').replace(/[/\\:]/g, '-')}--`;
}
