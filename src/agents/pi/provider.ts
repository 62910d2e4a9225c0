import { resolve } from 'node:path';
import type { CliMessage } from '../../protocol/index.ts';
import { spawnAgent, type AgentProcess } from '../../process/index.ts';
import type { AttemptExit } from '../shared/agent-mapper.ts';
import { agentEnv, resolveCommand } from '../shared/agent-env.ts';
import { prepareManagedAgentDir, sessiondStateDir, userAgentDir } from './agent-dir.ts';
import { PiMapper } from './mapper.ts';
import { formatOptionErrors, piArgs, PiOptionsSchema, type PiOptionsInput } from './options.ts';

/** After pi's final `agent_end`, how long it may take to exit before it is stopped. */
export const EXIT_GRACE_MS = 5000;

/**
 * pi 0.73 dies at once on SIGINT and leaves its bash tool processes running;
 * on SIGTERM it kills them first. The tree kill that follows holds either way.
 */
export const PI_INTERRUPT_SIGNAL: NodeJS.Signals = 'SIGTERM';

export interface RunContext {
  signal?: AbortSignal;
  /** The tree marker to use (the durable runtime records it before the spawn, for orphan reaping). */
  marker?: string;
  /** Sees the process once it is started: the durable runtime records it for orphan reaping. */
  onSpawn?: (agent: Pick<AgentProcess, 'pid' | 'marker' | 'startTime'>) => void;
}

/**
 * Exactly one attempt of pi.
 * Contract: yields the attempt's messages and ends with exactly one terminal
 * message; never throws for anything the agent or its environment does (a
 * failure to start is a `terminal.failed` of category `startup`). When the
 * caller's signal aborts, the process tree is stopped on its own deadline and
 * then the iterator rejects with the caller's abort reason; messages already
 * yielded stay delivered. No retry here, ever.
 */
export async function* runPi(input: PiOptionsInput, context: RunContext = {}): AsyncGenerator<CliMessage, void, undefined> {
  const { signal } = context;
  signal?.throwIfAborted();
  const parsed = PiOptionsSchema.safeParse(input);
  const resumeSessionId = parsed.success && parsed.data.session.mode === 'resume' ? parsed.data.session.id : undefined;
  const persistsSession = !parsed.success || parsed.data.session.mode !== 'none';
  const mapper = new PiMapper({ persistsSession, ...(resumeSessionId === undefined ? {} : { resumeSessionId }) });
  const startupFailure = (message: string): CliMessage[] =>
    mapper.complete({ exitCode: null, signal: null, stopReason: null, stderrTail: '', spawnError: message });

  if (!parsed.success) {
    yield* startupFailure(`invalid pi options: ${formatOptionErrors(parsed.error)}`);
    return;
  }
  const options = parsed.data;
  const env = agentEnv(options.env);
  let agentDir: string;
  try {
    agentDir = await prepareManagedAgentDir(userAgentDir(options.agentDir, env), sessiondStateDir(env));
  } catch (error) {
    yield* startupFailure(`cannot prepare pi's agent dir: ${(error as Error).message}`);
    return;
  }

  const spawned = await spawnAgent({
    command: await resolveCommand(options.command, env),
    args: piArgs(options),
    ...(options.cwd === undefined ? {} : { cwd: resolve(options.cwd) }),
    env: { ...env, PI_CODING_AGENT_DIR: agentDir },
    // The prompt travels on stdin, then stdin is closed: pi starts at EOF, and no
    // prompt text can be taken for one of pi's flags or `@file` arguments.
    input: options.prompt,
    interruptSignal: PI_INTERRUPT_SIGNAL,
    idleTimeoutMs: options.idleTimeoutMs,
    ...(context.marker === undefined ? {} : { marker: context.marker }),
  });
  if (!spawned.ok) {
    yield* startupFailure(spawned.error);
    return;
  }
  const agent = spawned.agent;
  context.onSpawn?.({ pid: agent.pid, marker: agent.marker, startTime: agent.startTime });
  const onAbort = (): void => void agent.stop('requested');
  signal?.addEventListener('abort', onAbort, { once: true });
  let graceTimer: NodeJS.Timeout | undefined;
  let finished = false;
  try {
    for await (const line of agent.lines()) {
      const messages = mapper.push(line);
      clearTimeout(graceTimer);
      if (mapper.agentEnded) graceTimer = setTimeout(() => void agent.stop('exit_grace'), EXIT_GRACE_MS);
      if (signal?.aborted) break;
      yield* messages;
    }
    const exit = await agent.exited;
    clearTimeout(graceTimer);
    if (signal?.aborted) {
      await agent.stop('requested');
      throw signal.reason;
    }
    const attemptExit: AttemptExit = { ...exit, stderrTail: agent.stderrTail() };
    finished = true;
    yield* mapper.complete(attemptExit);
  } finally {
    clearTimeout(graceTimer);
    signal?.removeEventListener('abort', onAbort);
    // The consumer stopped early (break/return) or something threw: the tree must still go.
    if (!finished) await agent.stop('requested');
  }
}
