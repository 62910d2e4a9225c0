import { resolve } from 'node:path';
import type { CliMessage } from '../../protocol/index.ts';
import { spawnAgent } from '../../process/index.ts';
import { traceEnv } from '../shared/trace-env.ts';
import { agentEnv } from '../shared/agent-env.ts';
import { EXIT_GRACE_MS, startupFailure, type RunContext } from '../shared/run-attempt.ts';
import { resolveAgentCli } from '../shared/agent-env.ts';
import { brokeredEnv, egressSpawn, withEgress } from '../shared/brokered.ts';
import type { AttemptEgress } from '../../process/egress/index.ts';
import { AcpLineMapper } from './mapper.ts';
import { AcpOptionsSchema, formatOptionErrors, type AcpOptions, type AcpOptionsInput } from './options.ts';
import { AcpTurn } from './turn.ts';

export { REPLAY_FENCE_METHOD } from './turn.ts';

/** ACP agents print stack traces and logs on stderr: keep only its tail. */
export const ACP_STDERR_TAIL_BYTES = 16 * 1024;

/**
 * Exactly one attempt of an ACP agent over stdio (JSON-RPC lines, the official SDK's client side):
 * spawn it with stdin a pipe, `initialize`, then `session/new`, or to resume `session/resume`
 * when the agent offers it, else `session/load` (its replay of the history is not this
 * attempt's output and is dropped, up to a round trip after the answer: REPLAY_FENCE_METHOD), else — no such capability, or the load answered an error —
 * a new session (`session.started` with the new id says so); then one `session/prompt` with the text. Its updates are mapped by AcpUpdates; its stop
 * reason ends the attempt as `terminal.completed`, an error answer as `terminal.failed` (category
 * decided once in failure.ts). An agent that advertises the steering extension gets the running turn's steers
 * through it (steering.ts; the runtime's fallback otherwise). After the answer stdin is closed and the process gets
 * EXIT_GRACE_MS to exit, then its tree is stopped (what its tools left running included).
 *
 * Contract: as runAgentAttempt (shared/run-attempt.ts), whose process layer it uses (spawn,
 * sealed env, marker, cgroup, the three-stage stop): yields the attempt's messages and ends with
 * exactly one terminal message; never throws for anything the agent does. When the caller's
 * signal aborts: `session/cancel` first, up to `cancelGraceMs` for the prompt to end, then the
 * three-stage stop of the tree; then the iterator rejects with the abort reason. A consumer that stops
 * reading before the end (`return()`) gets the same stop, the cancel first. The attempt
 * cannot use runAgentAttempt's loop itself: ACP is request/response on a process that stays up
 * (it never exits after its last event), so this loop drives the process's stdin as well.
 */
export async function* runAcp(
  input: AcpOptionsInput,
  context: RunContext = {},
): AsyncGenerator<CliMessage, void, undefined> {
  context.signal?.throwIfAborted();
  const parsed = AcpOptionsSchema.safeParse(input);
  if (!parsed.success) {
    yield* startupFailure(new AcpLineMapper(), `invalid ACP agent options: ${formatOptionErrors(parsed.error)}`);
    return;
  }
  const options = parsed.data;
  const env = { ...agentEnv(options.env), ...traceEnv(context) };
  // Egress without brokering: an ACP agent's model host is not known to sessiond, so it reaches only
  // what policy.network lists (its model host included), with its own key (docs/network.md).
  yield* withEgress(context, null, new AcpLineMapper(), (egress) => runAcpProcess(options, env, egress, context));
}

async function* runAcpProcess(
  options: AcpOptions,
  env: Record<string, string>,
  egress: AttemptEgress | null,
  context: RunContext,
): AsyncGenerator<CliMessage, void, undefined> {
  const spawned = await spawnAgent({
    command: await resolveAgentCli(options.command, env),
    args: options.args,
    ...(options.cwd === undefined ? {} : { cwd: resolve(options.cwd) }),
    env,
    stdinMode: 'pipe',
    interruptSignal: 'SIGTERM',
    idleTimeoutMs: options.idleTimeoutMs,
    stderrTailBytes: ACP_STDERR_TAIL_BYTES,
    ...(context.marker === undefined ? {} : { marker: context.marker }),
    ...(context.limits === undefined ? {} : { limits: context.limits }),
    sandbox: { ...context.sandbox },
    ...egressSpawn(egress, (reached) => ({ env: brokeredEnv(env, reached, null) })),
  });
  if (!spawned.ok) {
    yield* startupFailure(new AcpLineMapper(), spawned.error);
    return;
  }
  const agent = spawned.agent;
  context.onSpawn?.({ pid: agent.pid, marker: agent.marker, startTime: agent.startTime, sandbox: agent.sandbox });
  const { steering, steeringNative } = context;
  const steerable =
    steering !== undefined && steeringNative !== undefined ? { channel: steering, native: steeringNative } : null;
  const turn = new AcpTurn(agent, options, env, context.approvals ?? null, steerable);
  let finished = false;
  try {
    yield* turn.run(context.signal);
    finished = true;
  } finally {
    // Left before the turn ended (aborted, or the consumer stopped reading): cancelled first, then stopped.
    if (!finished) await turn.leave(EXIT_GRACE_MS);
  }
}
