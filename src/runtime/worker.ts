import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { DelayedError, Worker, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { isAttemptState } from '../../machines/states.ts';
import { LIFECYCLE_DEFAULTS, SHUTDOWN_GRACE_MS, SWEEP_INTERVAL_MS } from '../config/defaults.ts';
import type { DeploymentPolicy } from '../policy/index.ts';
import { detectContainment, detectSandbox, killEscapees, type AttemptLimits } from '../process/index.ts';
import { ActiveSession, type ActiveSessionConfig } from './session-loop/active-session.ts';
import { createTracing, type Tracing } from './tracing/tracing.ts';
import { deploymentPolicy } from './deployment-policy.ts';
import { EventBus } from './event-bus.ts';
import type { Keys } from './keys.ts';
import { markerScope, reapOrphans } from './orphans.ts';
import { PolicyStore } from './policy-store.ts';
import { ACTIVATION_JOB, parseJobData, reconcileActivations, type SessionQueue } from './queue.ts';
import { SharedSessionMachine } from './shared-machine.ts';
import { SessionStore } from './store/session-store.ts';
import { sweep } from './lifecycle/sweeper.ts';
import { FleetLimits, type LimitRule } from './limits/index.ts';
import type { AdmissionGate } from './limits/gate.ts';
import { promoteActivations } from './limits/wake.ts';
import type { AttemptRefusal } from '../process/egress/index.ts';
import { egressField } from './counters.ts';
import { lifecycleKeys } from './lifecycle/keys.ts';
import { createWorkspaces, type WorkspaceConfig, type Workspaces } from '../workspace/index.ts';
import { sweepWorkspaces } from './lifecycle/workspace-sweep.ts';

export interface WorkerOptions {
  /** Creates a new Redis connection (the worker needs several: commands, pub/sub, BullMQ's blocking one). */
  connect: (role: string) => Redis;
  keys: Keys;
  queue: SessionQueue;
  concurrency: number;
  leaseTtlMs: number;
  /** BullMQ's stalled-job check; a dead worker's sessions are taken over within about leaseTtlMs + this. */
  stalledIntervalMs: number;
  holdBackoffMs: number;
  pollMs: number;
  heartbeatMs: number;
  agentOptions: ActiveSessionConfig['agentOptions'];
  /** What callers may choose; every stored request is checked against it again at each attempt. Default: the default policy, this process's cwd as the workspace. */
  policy?: DeploymentPolicy;
  /** Ceilings of each attempt's cgroup, where the host has cgroup containment. */
  limits?: AttemptLimits;
  /** Finished sessions are removed this long after they finished (0: kept forever). Default 0. */
  retentionMs?: number;
  /** How often the lifecycle sweeper runs (retention, removals cut short). @default SWEEP_INTERVAL_MS (10 s) */
  sweepIntervalMs?: number;
  /** A removal on record this long was cut short: the sweeper finishes it. Default 60 s. */
  sweepResumeAfterMs?: number;
  /** Messages one session's log may hold; the turn that reaches it ends failed (`quota`). 0: no limit. */
  maxLogMessages?: number;
  /** Bytes of message content one session's log may hold; as maxLogMessages. @default LIFECYCLE_DEFAULTS.maxLogBytes (64 MiB) */
  maxLogBytes?: number;
  /**
   * The queue partitions this worker takes jobs from (SESSIOND_QUEUE_PARTITIONS_CONSUMED). Default:
   * every partition below the highest count the deployment has used, so that a partition a smaller
   * count no longer fills is still emptied.
   */
  consumePartitions?: readonly number[];
  /** Fenced writes wait for this many replicas (Redis WAIT, SESSIOND_REDIS_WAIT_REPLICAS); 0: no wait. */
  waitReplicas?: number;
  waitTimeoutMs?: number;
  /** Fleet-wide limits (SESSIOND_LIMITS): an attempt under one waits, parked, for capacity. Default none. */
  fleetLimits?: readonly LimitRule[];
  /** How often a session waiting for a limit looks again by itself: only a safety net, a release (or a lapsed hold, found every leaseTtlMs/3) wakes it. Default 30 s. */
  limitPollMs?: number;
  log?: (level: 'info' | 'warn' | 'error', message: string, fields?: Record<string, unknown>) => void;
  /**
   * Egress by policy (src/process/egress): each attempt's network goes through a proxy of this worker
   * that lets it reach its model host and the policy's `network` hosts only, and its provider key stays
   * here (brokered). Refusals are audited (`log`, `msg: "audit"`) and counted. Default true.
   */
  egress?: boolean;
  /** Told when a turn ends and when an attempt fails (src/api/worker.ts). */
  events?: ActiveSessionConfig['events'];
  /**
   * Per-session workspaces (docs/workspaces.md): a session whose caller names no cwd gets its own
   * files, recorded after every tool call and restored on any host. Absent: sessions run in their cwd.
   */
  workspaces?: WorkspaceConfig;
  /** Traces of turns and attempts. Default: OpenTelemetry over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT is set, none otherwise (see tracing/tracing.ts). */
  tracing?: Tracing | null;
}

/** The defaults of the options above (one place for them and the config schema: src/config/defaults.ts). */
export { WORKER_DEFAULTS } from '../config/defaults.ts';

/**
 * A sessiond worker: takes activation jobs from the queue and drives each
 * session it gets the lease of. Contract: `close(graceMs)` stops taking jobs,
 * lets running attempts go on up to the deadline, then stops them (their
 * process trees are gone when it resolves) and leaves them recorded as
 * interrupted, to be retried by whichever worker takes the session next.
 */
export class SessionWorker {
  readonly id = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  readonly #options: WorkerOptions;
  readonly #redis: Redis;
  readonly #subscriber: Redis;
  readonly #store: SessionStore;
  readonly #bus: EventBus;
  readonly #policies: PolicyStore;
  readonly #active = new Map<string, ActiveSession>();
  #workers: Worker[] = [];
  #consumed: number[] = [];
  #timers: NodeJS.Timeout[] = [];
  #closing: Promise<void> | null = null;
  readonly #machine = new SharedSessionMachine();
  readonly #policy: DeploymentPolicy;
  readonly #containment = detectContainment();
  readonly #sandbox = detectSandbox();
  readonly #fleetLimits: FleetLimits;
  readonly #gate: AdmissionGate;
  #paused = false;
  #tracing: Tracing | null = null;
  readonly #workspaces: Workspaces | null;
  #workspaceSweep: Promise<void> | null = null;

  constructor(options: WorkerOptions) {
    this.#options = options;
    this.#workspaces = options.workspaces === undefined ? null : createWorkspaces(options.workspaces);
    this.#policy = options.policy ?? deploymentPolicy();
    this.#redis = options.connect('worker');
    this.#subscriber = options.connect('worker-events');
    this.#store = new SessionStore(this.#redis, options.keys, {
      retentionMs: options.retentionMs ?? 0,
      waitReplicas: options.waitReplicas ?? 0,
      ...(options.waitTimeoutMs === undefined ? {} : { waitTimeoutMs: options.waitTimeoutMs }),
    });
    this.#bus = new EventBus(this.#subscriber, this.#redis, options.keys);
    this.#policies = new PolicyStore(this.#redis, options.keys);
    this.#fleetLimits = new FleetLimits(this.#redis, options.keys.prefix, options.fleetLimits ?? []);
    this.#gate = {
      limits: this.#fleetLimits,
      pausedLocally: () => this.#paused,
      pollMs: options.limitPollMs ?? 30_000,
      wake: (ids) => void this.#wake(ids),
    };
  }

  /** Removes what deleted sessions left of their workspaces (workspace-sweep.ts); one sweep at a time. */
  #sweepWorkspaces(): void {
    const workspaces = this.#workspaces;
    const config = this.#options.workspaces;
    if (workspaces === null || config === undefined || this.#workspaceSweep !== null) return;
    const warn = (message: string, error: unknown): void => this.#warn(message)(error);
    this.#workspaceSweep = sweepWorkspaces(this.#redis, this.#options.keys, workspaces, config.root, warn)
      .then((r) => {
        if (r.removed + r.orphans > 0) this.#log('info', 'workspace sweep', { ...r });
      }, this.#warn('workspace sweep failed (tried again next round)'))
      .finally(() => {
        this.#workspaceSweep = null;
      });
  }

  /** Runs the parked activations of these sessions now (a release made room for them). */
  async #wake(sessionIds: readonly string[]): Promise<void> {
    await promoteActivations(this.#store, this.#options.queue, sessionIds);
  }

  async #refreshPaused(): Promise<void> {
    this.#paused = (await this.#fleetLimits.paused()).length > 0;
  }

  /** Dispatch is paused (fleet-wide or under some limit) as far as this worker knows: told over pub/sub, read again every leaseTtlMs/3. */
  get dispatchPaused(): boolean {
    return this.#paused;
  }

  get activeSessions(): string[] {
    return [...this.#active.keys()];
  }

  /** The embedder's log (nowhere by default). */
  readonly #log: NonNullable<WorkerOptions['log']> = (level, message, fields) =>
    this.#options.log?.(level, message, fields);

  /** A periodic or best-effort step that failed: said, and tried again at its next turn. */
  #warn(message: string): (error: unknown) => void {
    return (error) => this.#log('warn', message, { error: error instanceof Error ? error.message : String(error) });
  }

  async start(): Promise<void> {
    const log = this.#log;
    // Said once: how this worker keeps the processes of an attempt from outliving it.
    if (this.#containment.mode === 'sweep')
      log('warn', 'attempts are not contained by cgroups on this host', { containment: this.#containment.detail });
    else log('info', 'attempts contained by cgroups', { containment: this.#containment.detail });
    // Said once, plainly: what this worker's sandbox cannot stop (docs/sandbox.md).
    const sandbox = this.#sandbox;
    if (sandbox.refused !== null)
      log('error', 'every attempt will be refused: the sandbox asked for is unavailable', { sandbox: sandbox.refused });
    else if (sandbox.mode === 'bwrap') log('info', 'attempts run sandboxed (bwrap)', { sandbox: sandbox.detail });
    // A warning when auto found less than bwrap; the operator's explicit choice is only stated.
    else
      log(
        sandbox.requested === 'auto' ? 'warn' : 'info',
        `attempts run with sandbox mode ${sandbox.mode}, which does not stop everything`,
        {
          sandbox: sandbox.detail,
          gaps: sandbox.gaps,
        },
      );
    this.#tracing = this.#options.tracing !== undefined ? this.#options.tracing : await createTracing();
    if (this.#tracing !== null) log('info', 'traces exported over OTLP/HTTP');
    const escaped = killEscapees();
    if (escaped > 0) log('warn', "killed processes that had left their attempt's cgroup", { escaped });
    const reaped = await reapOrphans(markerScope(this.#options.keys.prefix));
    if (reaped.reaped > 0) log('warn', 'killed agent processes left by a dead worker', reaped);
    await this.#bus.start();
    this.#bus.on('*', (event) => {
      // A session being deleted: stop its turn now (the process tree gone) and let go.
      if (event.kind === 'delete') this.#active.get(event.sessionId)?.interrupt();
      if (event.kind === 'dispatch')
        void this.#refreshPaused().catch(this.#warn('dispatch state not read (read again every leaseTtlMs/3)'));
      if (event.kind !== 'policy') return;
      this.#policies.invalidate();
      for (const session of this.#active.values()) session.refreshPolicy();
    });
    await this.#refreshPaused();
    await this.#heartbeat();
    this.#timers.push(
      setInterval(
        () => void this.#heartbeat().catch(this.#warn('heartbeat not written (tried again next beat)')),
        this.#options.heartbeatMs,
      ),
    );
    // Lapsed holds (a dead worker's) come back, and the waiters there is room for are woken.
    this.#timers.push(
      setInterval(
        () =>
          void this.#refreshPaused()
            .then(() => this.#fleetLimits.wakeable())
            .then((ids) => this.#wake(ids))
            .catch(this.#warn('lapsed fleet-limit holds not looked at (looked at again every leaseTtlMs/3)')),
        Math.max(250, Math.floor(this.#options.leaseTtlMs / 3)),
      ),
    );
    this.#timers.push(
      setInterval(
        () =>
          void reconcileActivations(this.#store, this.#options.queue).catch(
            this.#warn('activations not reconciled (tried again next round)'),
          ),
        Math.max(5_000, this.#options.leaseTtlMs),
      ),
    );
    const lifecycle = {
      redis: this.#redis,
      keys: this.#options.keys,
      queue: this.#options.queue,
      publish: (event: Parameters<EventBus['publish']>[0]) => this.#bus.publish(event),
    };
    this.#timers.push(
      setInterval(
        () =>
          void sweep(lifecycle, {
            retentionMs: this.#options.retentionMs ?? 0,
            ...(this.#options.sweepResumeAfterMs === undefined
              ? {}
              : { resumeAfterMs: this.#options.sweepResumeAfterMs }),
          }).then((r) => {
            if (r.expired + r.resumed > 0) log('info', 'lifecycle sweep', { expired: r.expired, resumed: r.resumed });
            this.#sweepWorkspaces();
          }, this.#warn('lifecycle sweep failed (tried again next round)')),
        this.#options.sweepIntervalMs ?? SWEEP_INTERVAL_MS,
      ),
    );
    this.#sweepWorkspaces();
    const known = Math.max(this.#options.queue.partitions, await this.#options.queue.knownPartitions());
    const consumed = [...new Set(this.#options.consumePartitions ?? Array.from({ length: known }, (_, n) => n))].sort(
      (x, y) => x - y,
    );
    this.#consumed = consumed;
    // One BullMQ worker per partition (each its own blocking connection); the concurrency is shared
    // out among them, at least one each: a worker consuming P partitions drives up to max(concurrency, P).
    const share = (i: number): number =>
      Math.max(
        1,
        Math.floor(this.#options.concurrency / consumed.length) +
          (i < this.#options.concurrency % consumed.length ? 1 : 0),
      );
    this.#workers = consumed.map(
      (n, i) =>
        new Worker(
          this.#options.queue.name,
          (job: Job, token?: string, signal?: AbortSignal) => this.#process(job, token, signal),
          {
            connection: this.#options.connect(consumed.length === 1 ? 'worker-bullmq' : `worker-bullmq-${n}`),
            prefix: this.#options.keys.queuePartitionPrefix(n),
            concurrency: share(i),
            lockDuration: this.#options.leaseTtlMs,
            stalledInterval: this.#options.stalledIntervalMs,
            // The session machine is the only retry owner: a job that stalls is simply taken again.
            maxStalledCount: Number.MAX_SAFE_INTEGER,
            autorun: true,
          },
        ),
    );
    for (const worker of this.#workers)
      worker.on('error', (error) => log('error', 'queue error', { error: error.message }));
    await Promise.all(this.#workers.map((w) => w.waitUntilReady()));
  }

  /** The queue partitions this worker takes jobs from. */
  get partitions(): readonly number[] {
    return this.#consumed;
  }

  /** An attempt's request its egress proxy refused: one audit line (host, port, session, attempt) and the fleet counter. */
  #egressRefused(refusal: AttemptRefusal): void {
    this.#log('warn', 'audit', { audit: true, action: 'egress.refused', ...refusal });
    this.#redis
      .hincrby(lifecycleKeys(this.#options.keys).counters, egressField(refusal.reason), 1)
      .catch(this.#warn('the egress refusal was not counted'));
  }

  async #heartbeat(): Promise<void> {
    await this.#redis.hset(
      this.#options.keys.workers,
      this.id,
      JSON.stringify({
        id: this.id,
        host: hostname(),
        pid: process.pid,
        lastSeen: Date.now(),
        active: this.#active.size,
        concurrency: this.#options.concurrency,
        partitions: this.#consumed,
        containment: { mode: this.#containment.mode, detail: this.#containment.detail },
        sandbox: {
          mode: this.#sandbox.mode,
          detail: this.#sandbox.refused ?? this.#sandbox.detail,
          gaps: this.#sandbox.gaps,
          refused: this.#sandbox.refused !== null,
        },
      }),
    );
  }

  async #process(job: Job, token: string | undefined, signal: AbortSignal | undefined): Promise<string> {
    const log = this.#log;
    if (job.name !== ACTIVATION_JOB) return 'ignored: unknown job name';
    const data = parseJobData(job.data);
    if (!data.ok) {
      log('warn', 'malformed job data: nothing done', { jobId: job.id, error: data.message });
      return `ignored: ${data.message}`;
    }
    const { sessionId } = data;
    if (this.#closing !== null) return this.#requeue(job, token, Date.now() + 500);
    const lease = await this.#store.acquire(sessionId, this.id, this.#options.leaseTtlMs);
    if (!lease.ok) {
      if (lease.reason === 'unknown_session') {
        log('warn', 'job for an unknown session: nothing done', { jobId: job.id, sessionId });
        return 'ignored: unknown session';
      }
      // Another worker drives it (or its lease has not run out after a crash): look again later.
      return this.#requeue(job, token, Date.now() + Math.min(lease.retryInMs, this.#options.leaseTtlMs) + 50);
    }
    // Renewed from the moment it is held: the reap below may take seconds on a busy host.
    let session: ActiveSession | null = null;
    let lost = false;
    const renew = setInterval(
      () => {
        session?.renewHold();
        this.#store.renew(sessionId, lease.token, this.#options.leaseTtlMs).then((ok) => {
          if (ok) return;
          lost = true;
          session?.markStale();
        }, this.#warn('lease not renewed (tried again next tick; it lapses if none lands)'));
      },
      Math.max(100, Math.floor(this.#options.leaseTtlMs / 3)),
    );
    const onAbort = (): void => session?.interrupt();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const state = lease.loaded.meta.state;
      if (isAttemptState(state)) {
        // Taken over while an attempt ran: if its holder died on this host, what that attempt left
        // running goes now, before the attempt is recorded as interrupted (or its cancel as done).
        await reapOrphans(markerScope(this.#options.keys.prefix)).catch(
          this.#warn('orphan reap failed before a takeover (the attempt is still recorded interrupted)'),
        );
      }
      session = new ActiveSession({
        store: this.#store,
        bus: this.#bus,
        sessionId,
        token: lease.token,
        config: {
          agentOptions: this.#options.agentOptions,
          holdBackoffMs: this.#options.holdBackoffMs,
          leaseTtlMs: this.#options.leaseTtlMs,
          pollMs: this.#options.pollMs,
          policy: this.#policy,
          ...(this.#options.limits === undefined ? {} : { limits: this.#options.limits }),
          ...(this.#options.maxLogMessages === undefined ? {} : { maxLogMessages: this.#options.maxLogMessages }),
          maxLogBytes: this.#options.maxLogBytes ?? LIFECYCLE_DEFAULTS.maxLogBytes,
          workspaces: this.#workspaces,
          ...(this.#options.events === undefined ? {} : { events: this.#options.events }),
          gate: this.#gate,
          tracing: this.#tracing,
          workerId: this.id,
          ...(this.#options.log === undefined ? {} : { log: this.#options.log }),
          ...(this.#options.egress === false
            ? {}
            : { onEgressRefused: (refusal: AttemptRefusal) => this.#egressRefused(refusal) }),
        },
        globalPolicy: () => this.#policies.get(),
        loaded: lease.loaded,
        machine: this.#machine,
      });
      if (lost) session.markStale();
      if (signal?.aborted === true) session.interrupt();
      this.#active.set(sessionId, session);
      const outcome = await session.drive();
      log('info', 'session released', { sessionId, outcome: outcome.kind });
      if (outcome.kind === 'parked') return this.#requeue(job, token, outcome.until);
      if (outcome.kind === 'interrupted') return this.#requeue(job, token, Date.now());
      return outcome.kind;
    } finally {
      clearInterval(renew);
      signal?.removeEventListener('abort', onAbort);
      this.#active.delete(sessionId);
    }
  }

  /** Puts the job back as delayed until `at` (BullMQ's manual delay: the job keeps its id). */
  async #requeue(job: Job, token: string | undefined, at: number): Promise<never> {
    await job.moveToDelayed(at, token);
    throw new DelayedError();
  }

  close(graceMs = SHUTDOWN_GRACE_MS): Promise<void> {
    if (this.#closing !== null) return this.#closing;
    this.#closing = (async () => {
      for (const timer of this.#timers) clearInterval(timer);
      for (const session of this.#active.values()) session.drain();
      const deadline = setTimeout(() => {
        for (const session of this.#active.values()) session.interrupt();
      }, graceMs);
      try {
        await Promise.all(this.#workers.map((w) => w.close()));
      } finally {
        clearTimeout(deadline);
      }
      await this.#store
        .flushIndex()
        .catch(this.#warn('the fleet index was not flushed on close (the sweeper rebuilds it)'));
      // A workspace sweep under way finishes before its connection goes.
      await this.#workspaceSweep;
      await this.#tracing?.shutdown();
      await this.#redis
        .hdel(this.#options.keys.workers, this.id)
        .catch(this.#warn('this worker was not removed from the workers hash on close (its heartbeat goes stale)'));
      this.#subscriber.disconnect();
      // Closing: a connection that cannot say QUIT is gone already.
      await this.#redis.quit().catch(() => undefined);
    })();
    return this.#closing;
  }
}
