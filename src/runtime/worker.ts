import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { DelayedError, type Job, type Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { isAttemptState } from '../../machines/states.ts';
import { LIFECYCLE_DEFAULTS, SHUTDOWN_GRACE_MS } from '../config/defaults.ts';
import type { DeploymentPolicy } from '../policy/index.ts';
import { detectContainment, detectSandbox, killEscapees } from '../process/index.ts';
import { ActiveSession } from './session-loop/active-session.ts';
import { createTracing, type Tracing } from './tracing/tracing.ts';
import { deploymentPolicy } from './deployment-policy.ts';
import { EventBus } from './event-bus.ts';
import { freshRuns, killOwnAgents, markerScope, reapOrphans } from './orphans.ts';
import { monotonicNow, renewIntervalMs, SelfFence } from './self-fence.ts';
import { PolicyStore } from './policy-store.ts';
import { ACTIVATION_JOB, parseJobData } from './queue.ts';
import { SharedSessionMachine } from './shared-machine.ts';
import { SessionStore } from './store/session-store.ts';
import { deliversWebhooks, WebhookOutbox } from './webhooks/outbox.ts';
import { WebhookDeliverySchema } from '../config/webhooks.ts';
import { FleetLimits } from './limits/index.ts';
import type { AdmissionGate } from './limits/gate.ts';
import { promoteActivations } from './limits/wake.ts';
import type { AttemptRefusal } from '../process/egress/index.ts';
import { egressField } from './counters.ts';
import { lifecycleKeys } from './lifecycle/keys.ts';
import { consumedPartitions, partitionWorkers } from './partition-workers.ts';
import type { WorkerOptions } from './worker-options.ts';
import { startPeriodicSteps } from './worker-periodic.ts';
import { announceIsolation, workerRecord } from './worker-report.ts';
import { createWorkspaces, type Workspaces } from '../workspace/index.ts';
import { sweepWorkspaces } from './lifecycle/workspace-sweep.ts';
import { requireWorkspaceGit } from './workspace-git.ts';
import { offeredAgents } from './offered-agents.ts';
import { addAgentWait, removeAgentWait, wakeAgentWaiters } from './agent-waits.ts';
import { ScheduleRunner } from './schedules/fire.ts';

export type { WorkerOptions } from './worker-options.ts';
/** The defaults of the options (one place for them and the config schema: src/config/defaults.ts). */
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
  /** `git --version` of this host, read at start when this worker has workspaces. */
  #git: string | null = null;
  /** The agents this worker runs: a session of another one is handed back (admission.ts), not failed. */
  readonly #offers: ReadonlySet<string>;
  /** Sessions handed back for an agent this worker lacks while driven here: the fleet is told once their activation is parked. */
  readonly #handedBack = new Set<string>();
  #agentWake: Promise<void> | null = null;
  /** Records webhook events with the sessions' writes, and delivers them (null: no webhooks, none allowed to sessions). */
  readonly #webhooks: WebhookOutbox | null = null;
  /** Fires the schedules (any worker may take a firing): schedules/fire.ts. */
  #schedules: ScheduleRunner | null = null;
  /**
   * The orphan reap before a takeover, shared by takeovers that come together: each needs a scan of /proc that
   * started after it took the lease (the dead holder died before that), and a burst of N (a dead worker's
   * sessions, taken over at once) costs two scans instead of N at the same time (each 15-100 ms of CPU).
   */
  readonly #reapForTakeover = freshRuns(() => reapOrphans(markerScope(this.#options.keys.prefix)));

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
    // Sessions' own webhooks (policy.webhooks.hosts) need a deliverer here even without the operator's.
    const webhooks = {
      webhooks: options.webhooks?.webhooks ?? [],
      delivery: options.webhooks?.delivery ?? WebhookDeliverySchema.parse({}),
      sessionHosts: this.#policy.webhookHosts ?? [],
    };
    if (deliversWebhooks(webhooks)) {
      this.#webhooks = new WebhookOutbox(this.#redis, options.keys, webhooks, (level, message, fields) =>
        this.#log(level, message, fields),
      );
      this.#store.webhooks = this.#webhooks;
    }
    this.#bus = new EventBus(this.#subscriber, this.#redis, options.keys);
    this.#policies = new PolicyStore(this.#redis, options.keys);
    this.#fleetLimits = new FleetLimits(this.#redis, options.keys.prefix, options.fleetLimits ?? []);
    this.#offers = new Set(offeredAgents(options.agents, options.agentOptions, 'worker agents'));
    this.#gate = {
      limits: this.#fleetLimits,
      pausedLocally: () => this.#paused,
      pollMs: options.limitPollMs ?? 30_000,
      wake: (ids) => void this.#wake(ids),
      offers: (agent) => this.#offers.has(agent),
      waitForAgent: async (sessionId, agent, since) => {
        await addAgentWait(this.#redis, options.keys, sessionId, agent, since);
        this.#handedBack.add(sessionId);
      },
      agentFound: (sessionId, agent) => removeAgentWait(this.#redis, options.keys, sessionId, agent),
    };
  }

  /** Removes what deleted sessions left of their workspaces (workspace-sweep.ts); one sweep at a time. */
  #sweepWorkspaces(): void {
    const workspaces = this.#workspaces;
    const config = this.#options.workspaces;
    if (workspaces === null || config === undefined || this.#workspaceSweep !== null) return;
    const warn = (message: string, error: unknown): void => this.#warn(message)(error);
    this.#workspaceSweep = sweepWorkspaces(this.#redis, this.#options.keys, workspaces, config, warn)
      .then((r) => {
        if (r.removed + r.orphans > 0 || r.compacted) this.#log('info', 'workspace sweep', { ...r });
      }, this.#warn('workspace sweep failed (tried again next round)'))
      .finally(() => {
        this.#workspaceSweep = null;
      });
  }

  async #wake(sessionIds: readonly string[]): Promise<void> {
    await promoteActivations(this.#store, this.#options.queue, sessionIds);
  }

  /** The agents this worker runs (its heartbeat's `agents`). */
  get agents(): readonly string[] {
    return [...this.#offers];
  }

  /** The host's `git --version` its workspaces run (null: no workspaces, or not started yet). */
  get git(): string | null {
    return this.#git;
  }

  /**
   * Wakes sessions waiting for an agent this worker offers, as many as it has free slots for (one
   * pass at a time): at start, at each heartbeat, and when a worker lacking an agent hands one back.
   */
  #wakeAgentWaiters(): void {
    if (this.#agentWake !== null || this.#closing !== null) return;
    const room = this.#options.concurrency - this.#active.size;
    if (room <= 0) return;
    this.#agentWake = wakeAgentWaiters(this.#store, this.#options.queue, (agent) => this.#offers.has(agent), room)
      .then((woken) => {
        if (woken > 0) this.#log('info', 'woke sessions waiting for an agent this worker offers', { woken });
      }, this.#warn('sessions waiting for an agent were not woken (looked at again next heartbeat)'))
      .finally(() => {
        this.#agentWake = null;
      });
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
    // Before anything runs: a host without git says so now, not at each session's first attempt.
    if (this.#workspaces !== null) this.#git = await requireWorkspaceGit();
    announceIsolation(log, this.#containment, this.#sandbox);
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
      if (event.kind === 'agent-wait') this.#wakeAgentWaiters();
      if (event.kind !== 'policy') return;
      this.#policies.invalidate();
      for (const session of this.#active.values()) session.refreshPolicy();
    });
    await this.#refreshPaused();
    // Known before the first heartbeat, which names them (doctor, GET /api/workers).
    this.#consumed = await consumedPartitions(this.#options);
    await this.#heartbeat();
    this.#timers.push(
      ...startPeriodicSteps({
        options: this.#options,
        store: this.#store,
        fleetLimits: this.#fleetLimits,
        lifecycle: {
          redis: this.#redis,
          keys: this.#options.keys,
          queue: this.#options.queue,
          publish: (event) => this.#bus.publish(event),
        },
        heartbeat: async () => {
          await this.#heartbeat();
          this.#wakeAgentWaiters();
        },
        refreshPaused: () => this.#refreshPaused(),
        wake: (ids) => this.#wake(ids),
        log,
        warn: (message) => this.#warn(message),
        afterSweep: () => this.#sweepWorkspaces(),
      }),
    );
    this.#sweepWorkspaces();
    this.#webhooks?.start();
    this.#workers = partitionWorkers(this.#options, this.#consumed, (job, token, signal) =>
      this.#process(job, token, signal),
    );
    for (const worker of this.#workers)
      worker.on('error', (error) => log('error', 'queue error', { error: error.message }));
    await Promise.all(this.#workers.map((w) => w.waitUntilReady()));
    if (this.#options.schedules !== false) {
      this.#schedules = new ScheduleRunner({
        connect: this.#options.connect,
        keys: this.#options.keys,
        policy: this.#policy,
        queuePartitions: this.#options.queue.partitions,
        ...(this.#options.callerLimits === undefined ? {} : { callerLimits: this.#options.callerLimits }),
        ...(this.#options.fleetLimits === undefined ? {} : { fleetLimits: this.#options.fleetLimits }),
        workerId: this.id,
        lockMs: this.#options.leaseTtlMs,
        stalledIntervalMs: this.#options.stalledIntervalMs,
        log,
      });
      await this.#schedules.start();
    }
    // Sessions that waited for an agent this worker offers run now, not at their next look.
    this.#wakeAgentWaiters();
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
      workerRecord(
        {
          id: this.id,
          active: this.#active.size,
          concurrency: this.#options.concurrency,
          partitions: this.#consumed,
          agents: [...this.#offers],
        },
        this.#containment,
        this.#sandbox,
      ),
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
    const ttl = this.#options.leaseTtlMs;
    const acquireSentAt = monotonicNow();
    const lease = await this.#store.acquire(sessionId, this.id, ttl);
    if (!lease.ok) {
      if (lease.reason === 'unknown_session') {
        log('warn', 'job for an unknown session: nothing done', { jobId: job.id, sessionId });
        return 'ignored: unknown session';
      }
      // Another worker drives it (or its lease has not run out after a crash): look again later.
      return this.#requeue(job, token, Date.now() + Math.min(lease.retryInMs, ttl) + 50);
    }
    // Renewed from the moment it is held: the reap below may take seconds on a busy host.
    let session: ActiveSession | null = null;
    let lost = false;
    // Self-fencing (self-fence.ts): no renewal landed in time, so the lease may lapse and another
    // worker take the session: this one stops its agent at once and writes nothing more, before that.
    const fence = new SelfFence(ttl, acquireSentAt, () => {
      lost = true;
      log('warn', 'lease not renewed in time: agent stopped, nothing more written (self-fenced)', { sessionId });
      session?.fence();
      killOwnAgents(markerScope(this.#options.keys.prefix), sessionId).catch(
        this.#warn('the self-fenced session’s agent was not killed at once (its stop goes on as for a lost lease)'),
      );
    });
    const renew = setInterval(() => {
      session?.renewHold();
      const sentAt = monotonicNow();
      this.#store.renew(sessionId, lease.token, ttl).then((ok) => {
        if (ok) return fence.renewed(sentAt);
        lost = true;
        session?.markStale();
      }, this.#warn('lease not renewed (tried again next tick; the holder fences itself if none lands in time)'));
    }, renewIntervalMs(ttl));
    const onAbort = (): void => session?.interrupt();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const state = lease.loaded.meta.state;
      if (isAttemptState(state)) {
        // Taken over while an attempt ran: if its holder died on this host, what that attempt left
        // running goes now, before the attempt is recorded as interrupted (or its cancel as done).
        await this.#reapForTakeover().catch(
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
      if (fence.fired) session.fence();
      else if (lost) session.markStale();
      if (signal?.aborted === true) session.interrupt();
      this.#active.set(sessionId, session);
      const outcome = await session.drive();
      log('info', 'session released', { sessionId, outcome: outcome.kind });
      if (outcome.kind === 'parked' && this.#handedBack.has(sessionId)) {
        // Handed back for an agent this worker lacks: parked first, then the workers offering it are
        // told (a wake before the park would find the activation still running here).
        await job.moveToDelayed(outcome.until, token);
        await this.#bus
          .publish({ sessionId: '*', kind: 'agent-wait' })
          .catch(this.#warn('the fleet was not told of a hand-back (its workers look at each heartbeat)'));
        throw new DelayedError();
      }
      if (outcome.kind === 'parked') return this.#requeue(job, token, outcome.until);
      if (outcome.kind === 'interrupted') return this.#requeue(job, token, Date.now());
      // Self-fenced while still holding the job (Redis was slow, not gone): the job comes back once
      // the lease has lapsed, here or anywhere. A job whose lock was lost meanwhile is another's now.
      if (outcome.kind === 'stale' && fence.fired) return this.#requeue(job, token, Date.now() + ttl);
      return outcome.kind;
    } finally {
      fence.stop();
      clearInterval(renew);
      signal?.removeEventListener('abort', onAbort);
      this.#active.delete(sessionId);
      this.#handedBack.delete(sessionId);
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
      // No firing starts once closing; one under way finishes (an enqueue: short).
      await this.#schedules?.close();
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
      await this.#webhooks?.close();
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
