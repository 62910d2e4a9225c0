import { registerAgent } from '../agents/registry.ts';
import type { PolicyInput } from '../policy/index.ts';
import type { AttemptLimits } from '../process/index.ts';

/** The ceilings of one attempt's cgroup: its process count and memory (docs/concepts.md "ceilings"). */
export type AttemptCeilings = AttemptLimits;
import type { FailureCategory } from '../protocol/index.ts';
import { deploymentPolicy } from '../runtime/deployment-policy.ts';
import { createKeys } from '../runtime/keys.ts';
import { createSessionQueue } from '../runtime/queue.ts';
import { SessionWorker, WORKER_DEFAULTS } from '../runtime/worker.ts';
import { offeredAgents } from '../runtime/offered-agents.ts';
import type { WorkspaceConfig } from '../workspace/types.ts';
import type { LifecycleOptions } from './client.ts';
import { connections, type RedisOption } from './connections.ts';
import type { DefinedAgent } from './define-agent.ts';
import { resolveWorkspacesOption } from './workspaces-option.ts';

export interface WorkerOptions {
  redis: RedisOption;
  /** The key prefix shared with the clients. @default 'sessiond' */
  prefix?: string;
  /** Sessions driven at once. @default 4 */
  concurrency?: number;
  /** Agents of your own (defineAgent), besides the built-in ones. */
  agents?: readonly DefinedAgent[];
  /**
   * The agents this worker runs, by name: a session whose turn needs another one waits (parked, no
   * attempt run) for a worker that offers it, and `inspect` says so. @default every built-in agent,
   * those in `agents` and the `acp:` ones of `agentOptions`
   */
  offers?: readonly string[];
  /** Host options per agent (its `command`, `env`, `args`…): the operator's, never a caller's. @default {} */
  agentOptions?: Readonly<Record<string, Readonly<Record<string, unknown>>>>;
  /** The deployment policy every stored request is checked against again at each attempt. @default every agent, `workspace` the process's cwd */
  deploymentPolicy?: PolicyInput;
  /** A session's cwd when its caller names none, and the default allowed root. @default process.cwd() */
  workspace?: string;
  /** Session lease and BullMQ lock: a dead worker's sessions are taken over after about this (+ stalledIntervalMs); a holder that cannot renew it stops its agent before it lapses. @default 2000 */
  leaseTtlMs?: number;
  /** BullMQ's stalled-job check. @default 500 */
  stalledIntervalMs?: number;
  /** A longer backoff gives the worker slot back. @default 2000 */
  holdBackoffMs?: number;
  /** Inbox/cancel check without pub/sub. @default 1000 */
  pollMs?: number;
  /** Worker heartbeat. @default 5000 */
  heartbeatMs?: number;
  /** How long running attempts may go on once `close()` is called. @default 10000 */
  shutdownGraceMs?: number;
  /**
   * What the worker enforces of the lifecycle limits (as `createClient`'s `lifecycle`): `retentionMs`, a finished session removed this long after it finished (0: kept, the default);
   * `maxLogMessages`, the messages one session's log may hold (0: no limit, the default); `maxLogBytes`, the bytes of message content one session's log may hold
   * (0: no limit; default 67_108_864, 64 MiB).
   */
  lifecycle?: Partial<Pick<LifecycleOptions, 'retentionMs' | 'maxLogMessages' | 'maxLogBytes'>>;
  /** The ceilings of each attempt's cgroup (`pidsMax`, `memoryMaxBytes`), where the host has cgroup containment. */
  attemptCeilings?: AttemptCeilings;
  /** Each attempt's network through a proxy allowing its model host and `policy.network` only, its provider key brokered (docs/network.md). @default true */
  egress?: boolean;
  /**
   * Per-session workspaces (docs/workspaces.md; as `workspaces` in the config file): a session whose caller
   * names no cwd gets its own files under `root`, recorded after every tool call and restored on any host.
   * Give the clients that export, import, fork or diff the same value. On by default, as the CLI's worker:
   * under sessiond's state dir ($SESSIOND_STATE_DIR, else $XDG_STATE_HOME/sessiond, else
   * ~/.local/state/sessiond), a local store (one host), needing git on the host (`start()` rejects
   * without it). `false`: none, sessions run in their cwd. A ConfigError naming the field when it is
   * unusable (the root inside `gitDir`, a bad store…).
   * @default on, under the state dir
   */
  workspaces?: WorkspaceConfig | false;
}

/** What a worker tells its embedder. */
export interface WorkerEvents {
  /** A turn ended, told once its end is stored (`inspect` from the listener shows it), by the worker that ended it (one that took the session over included): `failureReason` is `not_retryable`, `attempts_exhausted` or `retry_disabled` for a failed one. */
  turnEnded: {
    sessionId: string;
    turn: number;
    status: 'completed' | 'failed' | 'cancelled';
    failureReason: string | null;
    cancelReason: string | null;
  };
  /** An attempt ended failed; the session machine decides whether it is retried. */
  attemptFailed: { sessionId: string; turn: number; attempt: number; category: FailureCategory; text: string };
  /** Something went wrong inside the worker (a queue error…); it goes on. */
  error: { message: string; fields?: Record<string, unknown> };
  /** An attempt's egress proxy refused a request (the audit record: host, port, session, attempt, reason). */
  egressRefused: {
    host: string;
    port: number;
    method: string;
    reason: string;
    sessionId: string;
    turn: number | null;
    attempt: number | null;
  };
}

export interface Worker {
  /** This worker's id, as its heartbeat names it. */
  readonly id: string;
  /** Takes jobs from now on (reaps what dead workers left on this host first). */
  start(): Promise<void>;
  /**
   * Graceful: stops taking jobs, lets running attempts go on for `shutdownGraceMs`, then stops them
   * (their process trees gone) and leaves them to be retried by whichever worker takes them next.
   */
  close(): Promise<void>;
  on<E extends keyof WorkerEvents>(event: E, listener: (payload: WorkerEvents[E]) => void): () => void;
}

/**
 * A sessiond worker in this process: takes activation jobs from the queue and drives each session
 * it gets the lease of, with the built-in agents and those in `agents`.
 */
export function createWorker(options: WorkerOptions): Worker {
  const workspaces = resolveWorkspacesOption(options.workspaces);
  for (const agent of options.agents ?? []) registerAgent(agent.name, agent.definition);
  // Checked before any connection is made: a bad name leaves nothing open.
  const offers = offeredAgents(options.offers, options.agentOptions ?? {}, 'offers');
  const { connect, closeAll } = connections(options.redis);
  const keys = createKeys(options.prefix ?? 'sessiond');
  const listeners: { [E in keyof WorkerEvents]: Set<(payload: WorkerEvents[E]) => void> } = {
    turnEnded: new Set(),
    attemptFailed: new Set(),
    error: new Set(),
    egressRefused: new Set(),
  };
  const emit = <E extends keyof WorkerEvents>(event: E, payload: WorkerEvents[E]): void => {
    for (const listener of listeners[event]) listener(payload);
  };
  const worker = new SessionWorker({
    connect,
    keys,
    queue: createSessionQueue(connect('worker-queue'), keys),
    concurrency: options.concurrency ?? WORKER_DEFAULTS.concurrency,
    leaseTtlMs: options.leaseTtlMs ?? WORKER_DEFAULTS.leaseTtlMs,
    stalledIntervalMs: options.stalledIntervalMs ?? WORKER_DEFAULTS.stalledIntervalMs,
    holdBackoffMs: options.holdBackoffMs ?? WORKER_DEFAULTS.holdBackoffMs,
    pollMs: options.pollMs ?? WORKER_DEFAULTS.pollMs,
    heartbeatMs: options.heartbeatMs ?? WORKER_DEFAULTS.heartbeatMs,
    agentOptions: options.agentOptions ?? {},
    agents: offers,
    policy: deploymentPolicy({
      ...(options.deploymentPolicy === undefined ? {} : { policy: options.deploymentPolicy }),
      ...(options.workspace === undefined ? {} : { workspace: options.workspace }),
      agents: options.agentOptions ?? {},
    }),
    ...(options.attemptCeilings === undefined ? {} : { limits: options.attemptCeilings }),
    ...(options.lifecycle?.retentionMs === undefined ? {} : { retentionMs: options.lifecycle.retentionMs }),
    ...(options.lifecycle?.maxLogMessages === undefined ? {} : { maxLogMessages: options.lifecycle.maxLogMessages }),
    ...(options.lifecycle?.maxLogBytes === undefined ? {} : { maxLogBytes: options.lifecycle.maxLogBytes }),
    // A schedule's firing is an enqueue under the same lifecycle limits.
    ...(options.lifecycle === undefined ? {} : { callerLimits: options.lifecycle }),
    ...(options.egress === undefined ? {} : { egress: options.egress }),
    ...(workspaces === null ? {} : { workspaces }),
    log: (level, message, fields) => {
      if (level === 'error') emit('error', { message, ...(fields === undefined ? {} : { fields }) });
      if (message === 'audit' && fields?.action === 'egress.refused') {
        const { audit: _audit, action: _action, ...refusal } = fields;
        emit('egressRefused', refusal as WorkerEvents['egressRefused']);
      }
    },
    events: {
      turnEnded: (event) => emit('turnEnded', event),
      attemptFailed: (event) => emit('attemptFailed', event as WorkerEvents['attemptFailed']),
    },
  });
  let closed: Promise<void> | null = null;
  return {
    id: worker.id,
    start: () => worker.start(),
    close() {
      closed ??= worker.close(options.shutdownGraceMs).finally(closeAll);
      return closed;
    },
    on(event, listener) {
      listeners[event].add(listener);
      return () => listeners[event].delete(listener);
    },
  };
}
