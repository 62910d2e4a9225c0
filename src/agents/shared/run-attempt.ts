import type { CliMessage } from '../../protocol/index.ts';
import type { EgressContext } from '../../process/egress/index.ts';
import {
  spawnAgent,
  type AgentProcess,
  type AttemptLimits,
  type SandboxMode,
  type SpawnSpec,
} from '../../process/index.ts';
import type { AgentMapper } from './agent-mapper.ts';
import type { ApprovalGate } from './approval-gate.ts';
import type { SteeringChannel } from './steering.ts';
import { traceEnv } from './trace-env.ts';

/** What every agent's provider accepts besides its own options. */
export interface RunContext {
  signal?: AbortSignal;
  /** The tree marker to use (the durable runtime records it before the spawn, for orphan reaping). */
  marker?: string;
  /** Sees the process once it is started: the durable runtime records it for orphan reaping. */
  onSpawn?: (agent: Pick<AgentProcess, 'pid' | 'marker' | 'startTime' | 'sandbox'>) => void;
  /**
   * The attempt's sandbox: every attempt of the durable runtime runs in one (the host's mode, see
   * process/sandbox/), with the files its agent declares; `required` (the deployment policy's
   * `sandbox.required`) refuses the attempt where the host has none. Absent: the host's mode, not required.
   */
  sandbox?: { mode?: SandboxMode; required?: boolean };
  /** Ceilings of the attempt's cgroup (the worker's configuration). */
  limits?: AttemptLimits;
  /** Where an agent in `ask` mode takes its permission requests (the durable runtime's; none: nobody to ask). */
  approvals?: ApprovalGate;
  /** The attempt's W3C trace context: the agent's process gets it as `TRACEPARENT` / `TRACESTATE` (see trace-env.ts). */
  traceparent?: string;
  tracestate?: string;
  /**
   * The attempt's network (src/process/egress): a proxy that lets it reach only its model host and
   * the hosts the deployment policy lists, and a model bridge holding the provider's key. Absent:
   * the agent reaches the network directly, with its key in its own configuration.
   */
  egress?: EgressContext;
  /**
   * Steers for the running turn (./steering.ts); given only to an agent whose definition says `steering: 'native'`
   * or `'advertised'`.
   */
  steering?: SteeringChannel;
  /**
   * An agent whose definition says `steering: 'advertised'` calls this once it knows that its agent takes steers
   * (before any tool call): from then on the runtime leaves the running turn's steers to `steering` (no fallback).
   */
  steeringNative?: () => void;
}

/** A mapper that can tell when the agent printed its final event (then it should exit soon). */
export interface FinishingMapper extends AgentMapper {
  readonly agentEnded: boolean;
}

/** After the agent's final event, how long it may take to exit before it is stopped. */
export const EXIT_GRACE_MS = 5000;

export function startupFailure(mapper: AgentMapper, message: string): CliMessage[] {
  return mapper.complete({ exitCode: null, signal: null, stopReason: null, stderrTail: '', spawnError: message });
}

/** Spawns an attempt's process with the attempt's trace context, marker and limits, and tells `onSpawn` once it runs. */
export async function spawnForAttempt(spec: SpawnSpec, context: RunContext): ReturnType<typeof spawnAgent> {
  const trace = traceEnv(context);
  const { finalize } = spec;
  const spawned = await spawnAgent({
    ...spec,
    env: { ...spec.env, ...trace },
    // An environment finalize makes (with the bridges' URLs) carries the trace context too.
    ...(finalize === undefined
      ? {}
      : {
          finalize: async (urls: Readonly<Record<string, string>>) => {
            const final = await finalize(urls);
            return final.env === undefined ? final : { ...final, env: { ...final.env, ...trace } };
          },
        }),
    sandbox: { ...spec.sandbox, ...context.sandbox },
    ...(context.marker === undefined ? {} : { marker: context.marker }),
    ...(context.limits === undefined ? {} : { limits: context.limits }),
  });
  if (spawned.ok)
    context.onSpawn?.({
      pid: spawned.agent.pid,
      marker: spawned.agent.marker,
      startTime: spawned.agent.startTime,
      sandbox: spawned.agent.sandbox,
    });
  return spawned;
}

/**
 * One attempt of an agent process: spawn it (never through a shell), map its
 * stdout line by line, end with the mapper's terminal message. Shared by every
 * agent's provider.
 *
 * Contract: yields the attempt's messages and ends with exactly one terminal
 * message; a failure to start is a `startup` terminal, never a throw. However the attempt ends, no
 * process of its tree is left once the iterator is done (or rejects): a
 * tool's background job or a process that escaped the marker is killed with the attempt's cgroup,
 * or found by the marker/group/parent sweep where the host has no cgroups. When the
 * caller's signal aborts, the process tree is stopped on its own deadline (the
 * aborted signal never drives the stop) and then the iterator rejects with the
 * caller's abort reason; messages already yielded stay delivered. If the
 * consumer stops early, the tree is stopped too.
 */
export async function* runAgentAttempt(
  spec: SpawnSpec,
  mapper: FinishingMapper,
  context: RunContext,
): AsyncGenerator<CliMessage, void, undefined> {
  const spawned = await spawnForAttempt(spec, context);
  if (!spawned.ok) {
    yield* startupFailure(mapper, spawned.error);
    return;
  }
  yield* followAgent(spawned.agent, mapper, context.signal);
}

/** What a provider adds to followAgent's loop (pi's RPC mode: its commands on stdin). */
export interface FollowHooks {
  /** Each stdout line, after the mapper read it: true when the turn is over by the provider's account (the exit grace starts). */
  line?: (line: string) => boolean;
  /** The caller's signal aborted: called before the tree is stopped. */
  aborted?: () => void;
  /** The agent's stdout ended (before its exit is awaited), and again however the attempt ends. */
  ended?: () => void;
}

/**
 * The rest of an attempt once its process runs (runAgentAttempt's contract): each stdout line to the mapper, the
 * exit grace once the agent printed its final event, the mapper's terminal at the exit; on the caller's abort the
 * tree is stopped and the iterator rejects with the abort reason. However it ends, the tree is stopped.
 */
export async function* followAgent(
  agent: AgentProcess,
  mapper: FinishingMapper,
  signal: AbortSignal | undefined,
  hooks: FollowHooks = {},
): AsyncGenerator<CliMessage, void, undefined> {
  const onAbort = (): void => {
    hooks.aborted?.();
    void agent.stop('requested');
  };
  signal?.addEventListener('abort', onAbort, { once: true });
  if (signal?.aborted === true) onAbort();
  let graceTimer: NodeJS.Timeout | undefined;
  try {
    for await (const line of agent.lines()) {
      const messages = mapper.push(line);
      const over = hooks.line?.(line) === true;
      clearTimeout(graceTimer);
      if (mapper.agentEnded || over) graceTimer = setTimeout(() => void agent.stop('exit_grace'), EXIT_GRACE_MS);
      if (signal?.aborted) break;
      yield* messages;
    }
    hooks.ended?.();
    const exit = await agent.exited;
    clearTimeout(graceTimer);
    if (signal?.aborted) {
      await agent.stop('requested');
      throw signal.reason;
    }
    yield* mapper.complete({ ...exit, stderrTail: agent.stderrTail() });
  } finally {
    clearTimeout(graceTimer);
    signal?.removeEventListener('abort', onAbort);
    hooks.ended?.();
    // However the attempt ended, what its tools left running goes before the attempt is over (the
    // machine records the attempt's end only once this generator has finished).
    await agent.stop('requested');
  }
}
