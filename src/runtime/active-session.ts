import { AttemptTally } from './counters.ts';
import { persistSession, startSessionActor, stateName, type PersistedSession, type SessionActor, type Transition } from '../../machines/restore.ts';
import { isAttemptState, QUIESCENT_MACHINE_STATES } from '../../machines/states.ts';
import type { AttemptRunner, MessageSink, SessionContext } from '../../machines/types.ts';
import type { CliMessage } from '../protocol/index.ts';
import type { DeploymentPolicy } from '../policy/index.ts';
import type { AttemptLimits } from '../process/index.ts';
import type { RetryPolicy } from '../retry/index.ts';
import { exportAgentState, importAgentState, prepareAgentAttempt } from './agent-attempt.ts';
import { admitTurn, boundedRetryPolicy, refusedAttempt } from './deployment-policy.ts';
import type { AdmissionGate } from './limits/gate.ts';
import type { Hold, LimitKey, MatchValues } from './limits/index.ts';
import { turnDeadline } from '../../machines/session.machine.ts';
import { settleUnqueue, unqueueField, unqueueRequests } from './queued-prompts.ts';
import { consumeResume, RESUME_FIELD, wallToken } from './resume-parked.ts';
import type { EventBus } from './event-bus.ts';
import type { SharedSessionMachine } from './shared-machine.ts';
import { markerScope } from './orphans.ts';
import { SessionWriter, type SnapshotValue } from './session-writer.ts';
import { tokenCount, usageTotals } from './usage/usage.ts';
import { SessionTracer } from './tracing/session-tracer.ts';
import type { Tracing } from './tracing/tracing.ts';
import { TurnPrompts } from './turn-prompts.ts';
import { AttemptApprovals } from './approvals/gate.ts';
import { ApprovalStore } from './approvals/store.ts';
import type { InboxPrompt, LoadedSession, SessionStore } from './store/session-store.ts';
import type { AttemptRefusal } from '../process/egress/index.ts';

/** States in which the session needs nothing more from this worker. */
const QUIESCENT: ReadonlySet<string> = new Set(QUIESCENT_MACHINE_STATES);

export interface ActiveSessionConfig {
  /** Agent options that belong to the worker's host (command, agent dir, session dir, env…), per agent. */
  agentOptions: Readonly<Record<string, Readonly<Record<string, unknown>>>>;
  /** A backoff longer than this gives the worker slot back and parks the job until `nextRetryAt`. */
  holdBackoffMs: number;
  /** How often the holder looks at the inbox and the cancel flag even without a pub/sub event. */
  pollMs: number;
  /** The lease's time to live: a fleet-limit hold lapses with it (renewed with the lease). Default 30 s. */
  leaseTtlMs?: number;
  /** The deployment policy every stored request is checked against again, at the start of each attempt. */
  policy: DeploymentPolicy;
  /** Ceilings of each attempt's cgroup. */
  limits?: AttemptLimits;
  /** Messages the session's log may hold (0: no limit): the attempt that reaches it is stopped and ends failed, category `quota`. */
  maxLogMessages?: number;
  /** Fleet limits and paused dispatch: an attempt they apply to waits (parked) until admitted. */
  gate?: AdmissionGate;
  /** Told of what an embedder may observe (src/api/worker.ts); a listener that throws changes nothing. */
  events?: SessionEvents;
  /** Spans of turns and attempts (none: no tracing, nothing is made). */
  tracing?: Tracing | null;
  /** This worker's id (on the spans). */
  workerId?: string;
  /**
   * Egress by policy (src/process/egress): each attempt gets a proxy that lets it reach only its
   * model host and `policy.network` of its agent, and a model bridge holding its key. This is told
   * of every refused request (the worker audits and counts it). Absent: no egress proxy.
   */
  onEgressRefused?: (refusal: AttemptRefusal) => void;
}

/** What a worker tells its embedder, as the session machine takes it (the fenced write follows at once). */
export interface SessionEvents {
  turnEnded?(event: { sessionId: string; turn: number; status: 'completed' | 'failed' | 'cancelled'; failureReason: string | null; cancelReason: string | null }): void;
  attemptFailed?(event: { sessionId: string; turn: number; attempt: number; category: string; text: string }): void;
}

const TURN_ENDS = new Set(['completed', 'failed', 'cancelled']);

function tell(fn: () => void): void {
  try {
    fn();
  } catch {
    // An embedder's listener never breaks the session.
  }
}

export type DriveOutcome = { kind: 'released' } | { kind: 'parked'; until: number } | { kind: 'stale' } | { kind: 'interrupted' };

/**
 * Drives one session while this worker holds its lease: restores the actor from
 * Redis, feeds it the inbox, persists every transition and every message
 * (batched, fenced), and gives the session back when there is nothing left to do.
 */
export class ActiveSession {
  readonly #store: SessionStore;
  readonly #bus: EventBus;
  readonly #sessionId: string;
  readonly #config: ActiveSessionConfig;
  readonly #globalPolicy: () => Promise<RetryPolicy>;
  readonly #writer: SessionWriter;
  #actor: SessionActor | null = null;
  #wake: (() => void) | null = null;
  #stale = false;
  #interruptRequested = false;
  #draining = false;
  #checkInbox = true;
  #checkCancel = true;
  #checkPolicy = true;
  #checkUnqueue = false;
  /** An operator may have asked to resume the session from its quota wall. */
  #checkResume = false;
  #meta: Record<string, string> = {};
  /** Read with the lease: the meta and snapshot to start from… */
  #loaded: LoadedSession | null;
  /** …and, used once instead of reading them again, the cancel flag and the inbox (undefined: read Redis). */
  #loadedCancel: LoadedSession['cancel'] | undefined;
  #loadedInbox: InboxPrompt[] | undefined;
  /**
   * Ids of the inbox prompts this holder has handed to the actor. The inbox is trimmed by a later
   * (batched) write, so a read made before that write lands still holds them: they must be neither
   * fed nor counted for the trim again (counted twice, the trim would drop prompts that came after).
   */
  readonly #fed = new Set<string>();
  /** `turn/attempt` of the last attempt whose agent reported its turn completed (its terminal.completed went to the log). */
  #answered: string | null = null;
  /** The state name of the last snapshot handed to the writer. */
  #lastState: string | null = null;
  readonly #machine: SharedSessionMachine;
  /** The runner generators of this session still running (aborted ones included). */
  readonly #running = new Set<Promise<void>>();
  #detach: () => void = () => undefined;
  /** The fleet-limit hold of the attempt admitted last (given back when that attempt ends). */
  #hold: Hold | null = null;
  /** The limit keys this session last waited on (it leaves their wait sets if it stops waiting otherwise). */
  #waitKeys: LimitKey[] | null = null;
  readonly #token: string;
  readonly #approvals: ApprovalStore;
  /** Listeners of "an approval decision was stored for this session" (the attempts' gates). */
  readonly #decisionListeners = new Set<() => void>();
  /** Approval requests may be stored for this session (asked in this activation, or restored mid-turn): cleared when the turn is over. */
  #approvalsUsed = false;
  readonly #tracer: SessionTracer | null;

  constructor(init: {
    store: SessionStore;
    bus: EventBus;
    sessionId: string;
    token: string;
    config: ActiveSessionConfig;
    globalPolicy: () => Promise<RetryPolicy>;
    loaded?: LoadedSession;
    /** The worker's session machine, shared by the sessions it drives. */
    machine: SharedSessionMachine;
  }) {
    this.#store = init.store;
    this.#bus = init.bus;
    this.#sessionId = init.sessionId;
    this.#config = init.config;
    this.#globalPolicy = init.globalPolicy;
    this.#writer = new SessionWriter(init.store, init.sessionId, init.token);
    this.#token = init.token;
    this.#approvals = new ApprovalStore(init.store.redis, init.store.keys);
    this.#loaded = init.loaded ?? null;
    this.#loadedCancel = init.loaded?.cancel;
    this.#loadedInbox = init.loaded?.inbox;
    this.#machine = init.machine;
    const tracing = init.config.tracing ?? null;
    this.#tracer = tracing === null ? null : new SessionTracer(tracing, init.sessionId, init.config.workerId ?? init.token.split('#')[0] ?? '');
  }

  get sessionId(): string {
    return this.#sessionId;
  }

  /** Stop driving now: the attempt (if any) is stopped and stays recorded as running, so its next activation sees it interrupted. */
  interrupt(): void {
    this.#interruptRequested = true;
    this.#poke();
  }

  /** The worker is shutting down: let a running attempt go on, but start nothing new; give the session back as soon as no attempt runs. */
  drain(): void {
    this.#draining = true;
    this.#poke();
  }

  /** The global retry policy changed. */
  refreshPolicy(): void {
    this.#checkPolicy = true;
    this.#poke();
  }

  /** The lease was lost: write nothing more, stop the agent. */
  markStale(): void {
    this.#stale = true;
    this.#poke();
  }

  async drive(): Promise<DriveOutcome> {
    const unsubscribe = this.#bus.on(this.#sessionId, (event) => {
      if (event.kind === 'prompt') this.#checkInbox = true;
      if (event.kind === 'cancel') this.#checkCancel = true;
      if (event.kind === 'policy') this.#checkPolicy = true;
      if (event.kind === 'unqueue') this.#checkUnqueue = true;
      if (event.kind === 'resume') this.#checkResume = true;
      if (event.kind === 'approval') for (const listener of this.#decisionListeners) listener();
      this.#poke();
    });
    const poll = setInterval(() => {
      this.#checkInbox = true;
      this.#checkCancel = true;
      this.#poke();
    }, this.#config.pollMs);
    try {
      await this.#start();
      return await this.#loop();
    } finally {
      clearInterval(poll);
      unsubscribe();
      await this.#settled().catch(() => undefined);
      this.#detach();
      await this.#letGo();
    }
  }

  /** Renewed with the session's lease: the hold of a worker that dies lapses with it. */
  renewHold(): void {
    const hold = this.#hold;
    const gate = this.#config.gate;
    if (hold !== null && gate !== undefined) gate.limits.renew(hold, this.#config.leaseTtlMs ?? 30_000).catch(() => undefined);
  }

  /** Gives back a hold still held (its attempt never ran) and leaves the wait sets of a session that no longer waits. */
  async #letGo(): Promise<void> {
    const gate = this.#config.gate;
    if (gate === undefined) return;
    await this.#releaseHold(null);
    const waiting = this.#actor !== null && stateName(this.#actor.getSnapshot().value) === 'waiting';
    if (this.#waitKeys !== null && !waiting && !this.#stale) await gate.limits.forget(this.#sessionId, this.#waitKeys).catch(() => undefined);
  }

  async #releaseHold(terminal: CliMessage | null): Promise<void> {
    const hold = this.#hold;
    const gate = this.#config.gate;
    this.#hold = null;
    if (hold === null || gate === undefined) return;
    // A rate limit with a Retry-After pauses the starts of every session under the same keys until then.
    const retryAfter = terminal?.type === 'terminal.failed' && terminal.content.category === 'rate_limited' ? (terminal.content.retryAfterMs ?? 0) : 0;
    // The tokens it reported count against the keys' maxTokensPerMinute.
    const usage = terminal?.type === 'terminal.completed' ? usageTotals(terminal.content.usage) : null;
    const woken = await gate.limits.release(hold, retryAfter > 0 ? Date.now() + retryAfter : 0, usage === null ? 0 : tokenCount(usage)).catch(() => [] as string[]);
    if (woken.length > 0) gate.wake(woken.filter((id) => id !== this.#sessionId));
  }

  /** The values fleet limits match the next attempt on (the host's pinned provider/model win, as they do for the attempt). */
  #matchValues(options: Readonly<Record<string, unknown>>): MatchValues {
    const agent = typeof options.agent === 'string' ? options.agent : 'pi';
    const host = this.#config.agentOptions[agent] ?? {};
    const text = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
    const values: MatchValues = { agent };
    const provider = text(host.provider) ?? text(options.provider);
    const model = text(host.model) ?? text(options.model);
    const account = text(host.account);
    const tenant = text(this.#meta.tenant);
    if (provider !== undefined) values.provider = provider;
    if (model !== undefined) values.model = model;
    if (account !== undefined) values.account = account;
    if (tenant !== undefined) values.tenant = tenant;
    return values;
  }

  #trace(): void {
    const actor = this.#actor;
    if (this.#tracer === null || actor === null) return;
    this.#tracer.observe(actor.getSnapshot().context, this.#usageLabels());
  }

  /** The agent and model the current turn's attempts run with (the metrics' labels of its tokens). */
  #usageLabels(): { agent: string; model: string } {
    const values = this.#matchValues(this.#actor?.getSnapshot().context.turn?.options ?? {});
    return { agent: values.agent ?? 'pi', model: values.model ?? 'default' };
  }

  /** The machine's `admissionRequired` guard: a limit applies to the next attempt, or dispatch may be paused. */
  #gated(options: Readonly<Record<string, unknown>>): boolean {
    const gate = this.#config.gate;
    if (gate === undefined) return false;
    return gate.pausedLocally() || gate.limits.keysFor(this.#matchValues(options)).length > 0;
  }

  /** In `waiting`: takes the attempt's holds and lets it start, or parks the session until it may look again. */
  async #admit(): Promise<DriveOutcome | null> {
    const actor = this.#actor;
    const gate = this.#config.gate;
    if (actor === null) return null;
    const context = actor.getSnapshot().context;
    if (gate === undefined) {
      actor.send({ type: 'session.capacity' });
      return null;
    }
    const keys = gate.limits.keysFor(this.#matchValues(context.turn?.options ?? {}));
    const priority = Number(this.#meta.priority ?? 0);
    await this.#releaseHold(null);
    const admission = await gate.limits.acquire(this.#sessionId, keys, {
      priority: Number.isInteger(priority) ? priority : 0,
      holdTtlMs: this.#config.leaseTtlMs ?? 30_000,
      pollMs: gate.pollMs,
    });
    if (admission.ok) {
      this.#hold = admission.hold;
      this.#waitKeys = null;
      actor.send({ type: 'session.capacity' });
      return null;
    }
    this.#waitKeys = keys;
    const previous = context.waitingFor;
    actor.send({ type: 'session.waiting', waitingFor: { ...admission.waitingFor, since: previous?.limit === admission.waitingFor.limit ? previous.since : Date.now() } });
    return this.#park(Math.max(Date.now(), admission.waitingFor.until));
  }

  async #start(): Promise<void> {
    const loaded = this.#loaded;
    this.#meta = loaded !== null ? loaded.meta : ((await this.#store.meta(this.#sessionId)) ?? {});
    const raw = loaded !== null ? loaded.snapshot : await this.#store.snapshot(this.#sessionId);
    const persisted = raw === null ? null : (JSON.parse(raw) as PersistedSession);
    // Queued prompts an operator removed leave the mailbox before the actor runs (no turn can start first).
    if (persisted !== null) await this.#dropRemoved(persisted);
    this.#tracer?.restore(this.#meta.trace, persisted?.snapshot.context ?? null);
    this.#detach = this.#machine.attach(this.#sessionId, this.#runner(), this.#sink(), (options) => this.#gated(options));
    const machine = this.#machine.machine;
    const events = this.#config.events;
    // What had ended in the loaded snapshot was counted by the holder that wrote it.
    const tally = new AttemptTally(persisted?.snapshot.context ?? null);
    const prompts = new TurnPrompts(persisted?.snapshot.context.turnIndex ?? 0);
    const onTransition = (transition: Transition, snapshot: { context: SessionContext }): void => {
      const prompt = prompts.next(transition.event, snapshot.context);
      this.#writer.history(prompt === null ? transition : { ...transition, prompt });
      for (const field of tally.ended(snapshot.context)) this.#writer.count(field);
      if (events?.turnEnded !== undefined && TURN_ENDS.has(transition.to) && transition.event !== 'session.restored') {
        const { turnIndex, turn } = snapshot.context;
        const ended = {
          sessionId: this.#sessionId,
          turn: turnIndex,
          status: transition.to as 'completed' | 'failed' | 'cancelled',
          failureReason: turn?.failureReason ?? null,
          cancelReason: turn?.cancelReason ?? null,
        };
        // Told once the end is stored (with the write that records it): a listener that reads the session then sees it ended.
        this.#writer.landed(() => tell(() => events.turnEnded?.(ended)));
      }
    };
    const policy = await this.#policy();
    this.#actor =
      persisted === null
        ? startSessionActor(machine, { input: { sessionId: this.#sessionId, policy } }, { onTransition })
        : startSessionActor(machine, { persisted }, { onTransition });
    if (loaded !== null) {
      // The meta was read with the lease just now: the first policy check needs no second read
      // (and a new actor was just given this very policy).
      this.#checkPolicy = false;
      if (persisted !== null) this.#syncPolicy(policy);
    }
    this.#actor.subscribe({
      next: () => {
        this.#persist();
        this.#trace();
        this.#poke();
      },
      error: () => this.#poke(),
    });
    // What the restore itself recorded (an attempt found interrupted) is traced too.
    this.#trace();
    if (persisted === null) {
      // A new session: nothing to write yet; its first snapshot goes with the first prompt's write.
      this.#stage();
    } else {
      this.#lastState = stateName(persisted.snapshot.value);
      if (!QUIESCENT.has(this.#lastState)) this.#approvalsUsed = true;
      this.#persist();
    }
    // A resume asked for while nobody held the session (its activation was promoted for it).
    this.#checkResume = this.#meta[RESUME_FIELD] !== undefined;
  }

  /** Tells the writer the snapshot changed (it serialises it when it writes); returns the state's name. */
  #stage(): string | null {
    const actor = this.#actor;
    if (actor === null || this.#stale) return null;
    const state = stateName(actor.getSnapshot().value);
    this.#writer.snapshot(this.#take);
    this.#lastState = state;
    return state;
  }

  readonly #take = (): SnapshotValue => {
    const actor = this.#actor;
    if (actor === null) throw new Error('no actor to serialise');
    return { json: JSON.stringify(persistSession(actor)), state: stateName(actor.getSnapshot().value) };
  };

  /** Stops the actor; its pending snapshot is serialised first (a stopped actor's is not a session's). */
  #stopActor(): void {
    if (!this.#stale) this.#writer.materialize();
    this.#actor?.stop();
  }

  /**
   * A state change is written at once; a change within the same state (e.g. the agent's session
   * id recorded) goes with the next batch, within the writer's FLUSH_DELAY_MS, like the messages.
   * So does a change to a quiescent state: the loop is about to give the session back, and that
   * release writes the batch in the same call (or the timer does, if the loop goes on).
   */
  #persist(): void {
    const previous = this.#lastState;
    const state = this.#stage();
    if (state === null) return;
    if (state === previous || QUIESCENT.has(state)) {
      this.#writer.soon();
      return;
    }
    this.#writer.flush().catch((error: Error) => {
      if (error.name === 'StaleLeaseError') this.markStale();
    });
  }

  async #loop(): Promise<DriveOutcome> {
    const actor = this.#actor;
    if (actor === null) throw new Error('not started');
    for (;;) {
      if (this.#stale || this.#writer.failure !== null) return this.#stopStale();
      if (this.#interruptRequested) return this.#stopInterrupted();
      if (this.#checkPolicy) await this.#applyPolicy();
      // Prompts first: a cancel requested while nobody held the session is meant for the turn its
      // queued prompt starts (applied the other way round, it would hit an idle actor and be lost).
      if (this.#checkInbox) await this.#pullInbox();
      if (this.#checkCancel) await this.#applyCancel();
      if (this.#checkUnqueue) await this.#applyUnqueue();
      if (this.#checkResume) await this.#applyResume();
      const snapshot = actor.getSnapshot();
      const state = stateName(snapshot.value);
      // A session with nothing left to do is given back as done, also while the worker shuts down
      // (handed back as interrupted, it would cost another activation that finds nothing to do).
      if (QUIESCENT.has(state) && snapshot.context.mailbox.length === 0) {
        if (this.#approvalsUsed) {
          // The turn is over: requests still waiting go with the agent that asked them.
          this.#approvalsUsed = false;
          await this.#approvals.clear(this.#sessionId, this.#token).catch(() => undefined);
        }
        const released = await this.#release('idle');
        if (released !== null) return released;
        // Prompts or a cancel arrived meanwhile: take them in before trying again (not while draining).
        if (!this.#draining) {
          this.#checkInbox = true;
          this.#checkCancel = true;
          continue;
        }
      }
      if (this.#draining && !isAttemptState(state)) return this.#stopInterrupted();
      if (state === 'waiting') {
        const parked = await this.#admit();
        if (parked !== null) return parked;
        continue;
      }
      if (state === 'backoff' || state === 'parked') {
        // Parked (a long backoff, a quota wall), the session wakes at its retry or at its turn's wall-clock limit, whichever comes first.
        const deadline = turnDeadline(snapshot.context);
        const until = Math.min(snapshot.context.nextRetryAt ?? Date.now(), deadline ?? Number.POSITIVE_INFINITY);
        if (until - Date.now() > this.#config.holdBackoffMs) return this.#park(until);
      }
      await this.#nextWake();
    }
  }

  /** Resolves once every attempt of this session started so far has fully ended (aborted ones included). */
  async #settled(): Promise<void> {
    await Promise.all([...this.#running]);
  }

  #nextWake(): Promise<void> {
    return new Promise((resolve) => {
      this.#wake = resolve;
    });
  }

  #poke(): void {
    const wake = this.#wake;
    this.#wake = null;
    wake?.();
  }

  /** The policy the session's turns run under: its own or the global one, within the deployment's maxTurnMs. */
  async #policy(): Promise<RetryPolicy> {
    const override = this.#meta.policy;
    const policy = override !== undefined && override !== '' ? (JSON.parse(override) as RetryPolicy) : await this.#globalPolicy();
    return boundedRetryPolicy(policy, this.#config.policy);
  }

  async #applyPolicy(): Promise<void> {
    this.#checkPolicy = false;
    this.#meta = (await this.#store.meta(this.#sessionId)) ?? this.#meta;
    this.#syncPolicy(await this.#policy());
  }

  #syncPolicy(policy: RetryPolicy): void {
    const actor = this.#actor;
    if (actor === null) return;
    const current = actor.getSnapshot().context.policy;
    if (current !== policy && JSON.stringify(current) !== JSON.stringify(policy)) {
      actor.send({ type: 'session.policy', policy });
    }
  }

  async #applyCancel(): Promise<void> {
    this.#checkCancel = false;
    const loaded = this.#loadedCancel;
    this.#loadedCancel = undefined;
    const request = loaded !== undefined ? loaded : await this.#store.cancelRequest(this.#sessionId);
    const actor = this.#actor;
    if (request === null || actor === null) return;
    const snapshot = actor.getSnapshot();
    // The agent has already answered (its terminal.completed is in the log) and its attempt is only
    // cleaning up: there is nothing left to cancel. Cancelled now, the turn would end `cancelled`
    // with a completed answer in its log.
    const answered = stateName(snapshot.value) === 'running' && this.#answered === `${snapshot.context.turnIndex}/${snapshot.context.attempt}`;
    if (!answered) actor.send({ type: 'session.cancel', reason: request.reason });
    this.#writer.cancelHandled();
    this.#persist();
  }

  async #pullInbox(): Promise<void> {
    this.#checkInbox = false;
    if (this.#interruptRequested || this.#draining) return;
    const loaded = this.#loadedInbox;
    this.#loadedInbox = undefined;
    const read = loaded ?? (await this.#store.inbox(this.#sessionId));
    // An id no longer in the inbox was trimmed for good: no need to remember it.
    const present = new Set(read.map((prompt) => prompt.id));
    for (const id of this.#fed) if (!present.has(id)) this.#fed.delete(id);
    const prompts = read.filter((prompt) => !this.#fed.has(prompt.id));
    const actor = this.#actor;
    if (prompts.length === 0 || actor === null) return;
    const sessionOptions = parseObject(this.#meta.options);
    for (const prompt of prompts) {
      this.#fed.add(prompt.id);
      // A removed prompt's tombstone is trimmed with the others, never fed.
      if (prompt.removed === true) continue;
      const retryOf = typeof prompt.retryOf === 'number' ? { retryOf: prompt.retryOf } : {};
      actor.send({ type: 'session.prompt', prompt: { id: prompt.id, text: prompt.text, options: { ...sessionOptions, ...prompt.options }, ...retryOf } });
    }
    this.#writer.inboxConsumed(prompts.length);
    this.#persist();
  }

  /** Applies the removals recorded before this holder took the session to its persisted mailbox (see queued-prompts.ts). */
  async #dropRemoved(persisted: PersistedSession): Promise<void> {
    const requests = unqueueRequests(this.#meta);
    if (requests.size === 0) return;
    const context = persisted.snapshot.context;
    for (const [id, state] of requests) {
      if (state !== 'drop' && state !== 'pending') continue;
      const inMailbox = context.mailbox.some((p) => p.id === id);
      if (inMailbox) context.mailbox = context.mailbox.filter((p) => p.id !== id);
      if (state === 'drop') await this.#store.redis.hdel(this.#store.key(this.#sessionId, 'meta'), unqueueField(id));
      else await settleUnqueue(this.#store, this.#sessionId, id, inMailbox || !startedIn(context, id) ? 'removed' : 'started');
    }
  }

  /** Applies an operator's resume to the quota wall it was asked for; one meant for a wall already left is dropped. */
  async #applyResume(): Promise<void> {
    this.#checkResume = false;
    const actor = this.#actor;
    if (actor === null) return;
    const requested = await this.#store.redis.hget(this.#store.key(this.#sessionId, 'meta'), RESUME_FIELD);
    if (requested === null) return;
    const snapshot = actor.getSnapshot();
    if (stateName(snapshot.value) === 'parked' && requested === wallToken(snapshot.context)) actor.send({ type: 'session.resume' });
    await consumeResume(this.#store, this.#sessionId, requested).catch(() => undefined);
  }

  /** Decides the removals an operator asked for while this worker holds the session. */
  async #applyUnqueue(): Promise<void> {
    this.#checkUnqueue = false;
    const actor = this.#actor;
    if (actor === null) return;
    this.#meta = (await this.#store.meta(this.#sessionId)) ?? this.#meta;
    for (const [id, state] of unqueueRequests(this.#meta)) {
      if (state !== 'pending') continue;
      const context = actor.getSnapshot().context;
      const inMailbox = context.mailbox.some((p) => p.id === id);
      // Not in the mailbox and not started: unread, its inbox entry a tombstone (never fed).
      const outcome = inMailbox || !startedIn(context, id) ? 'removed' : 'started';
      if (inMailbox) {
        actor.send({ type: 'session.unqueue', promptId: id });
        this.#persist();
        // The snapshot without it is in Redis before the operator is told it is removed.
        await this.#writer.flush().catch(() => undefined);
      }
      await settleUnqueue(this.#store, this.#sessionId, id, outcome);
    }
  }

  /** Gives the lease back; `null` when prompts or a cancel arrived meanwhile (still held). */
  async #release(mode: 'idle' | 'keep'): Promise<DriveOutcome | null> {
    let result: 1 | 0;
    try {
      result = await this.#writer.release(mode);
    } catch {
      return this.#stopStale();
    }
    if (result === 0) return null;
    this.#stopActor();
    return { kind: 'released' };
  }

  async #park(until: number): Promise<DriveOutcome> {
    const released = await this.#release('keep');
    if (released?.kind !== 'released') return released ?? { kind: 'stale' };
    return { kind: 'parked', until };
  }

  async #stopInterrupted(): Promise<DriveOutcome> {
    // The snapshot in Redis still says which attempt ran: the next activation records it as interrupted.
    this.#stopActor();
    await this.#settled();
    await this.#writer.release('keep').catch(() => undefined);
    return { kind: 'interrupted' };
  }

  async #stopStale(): Promise<DriveOutcome> {
    this.#stale = true;
    this.#stopActor();
    await this.#settled();
    return { kind: 'stale' };
  }

  #sink(): MessageSink {
    return (message, meta) => {
      if (message.type === 'terminal.completed') {
        this.#answered = `${meta.turn}/${meta.attempt}`;
        // Counted by the same fenced write as the terminal message (queued first: never split from it).
        const usage = usageTotals(message.content.usage);
        if (usage !== null) {
          this.#writer.usage({ turn: meta.turn, attempt: meta.attempt, ...this.#usageLabels(), usage, at: Date.now() });
          this.#tracer?.tokens(meta.turn, meta.attempt, usage);
        }
      }
      const events = this.#config.events;
      if (message.type === 'terminal.failed' && events?.attemptFailed !== undefined) {
        const { category, text } = message.content;
        tell(() => events.attemptFailed?.({ sessionId: this.#sessionId, turn: meta.turn, attempt: meta.attempt, category, text }));
      }
      return this.#writer.message(meta.turn, meta.attempt, message.type, message.content);
    };
  }

  #runner(): AttemptRunner {
    const store = this.#store;
    const writer = this.#writer;
    const config = this.#config;
    const sessionId = this.#sessionId;
    const running = this.#running;
    const scope = markerScope(store.keys.prefix);
    const releaseHold = (terminal: CliMessage | null): Promise<void> => this.#releaseHold(terminal);
    const approvals = this.#approvals;
    const token = this.#token;
    const decisionListeners = this.#decisionListeners;
    const tracer = this.#tracer;
    const useApprovals = (): void => {
      this.#approvalsUsed = true;
    };
    return async function* runAttempt(request, { signal }) {
      let ended: () => void = () => undefined;
      const done = new Promise<void>((resolve) => (ended = resolve));
      running.add(done);
      let terminal: CliMessage | null = null;
      try {
        // The turn's trace context goes with it: a worker that takes the turn over after a crash joins the same trace.
        const traced = tracer?.beginAttempt(request.turn, request.attempt) ?? null;
        if (traced?.store != null) writer.trace(traced.store);
        // The snapshot saying this attempt runs is in Redis before the agent starts.
        await writer.flush();
        // Options read back from Redis are a caller's: checked again, as at enqueue, before anything runs.
        const admitted = await admitTurn(config.policy, request.options, request.text);
        if (!admitted.ok) {
          yield refusedAttempt(admitted.issues);
          return;
        }
        const attempt = await prepareAgentAttempt({ agentName: admitted.agent, hostOptions: config.agentOptions, callerOptions: admitted.options, sessionId, scope });
        await importAgentState(attempt, store, sessionId, request.agentSessionId);
        let agentSessionId = request.agentSessionId;
        // The log cap: one slot is kept for the terminal message that says the log is full.
        const limit = config.maxLogMessages ?? 0;
        let room = limit > 0 ? limit - 1 - (await store.lastSeq(sessionId)) : Number.POSITIVE_INFINITY;
        if (room <= 0) {
          yield logFull(limit);
          return;
        }
        const gate = new AttemptApprovals({
          store: approvals,
          sessionId,
          token,
          agent: attempt.agentName,
          turn: request.turn,
          attempt: request.attempt,
          policy: config.policy.approvals,
          pollMs: config.pollMs,
          onStore: useApprovals,
          onDecision: (listener) => {
            decisionListeners.add(listener);
            return () => decisionListeners.delete(listener);
          },
        });
        try {
          let full = false;
          for await (const message of attempt.agent.run(
            { text: request.text, resumeSessionId: request.agentSessionId, options: attempt.options },
            {
              signal,
              marker: attempt.marker,
              approvals: gate,
              sandbox: { required: config.policy.sandbox?.required === true },
              ...(config.limits === undefined ? {} : { limits: config.limits }),
              ...(traced === null ? {} : { traceparent: traced.traceparent }),
              ...(config.onEgressRefused === undefined
                ? {}
                : {
                    egress: { sessionId, turn: request.turn, attempt: request.attempt, allow: config.policy.network[attempt.agentName] ?? [], onRefused: config.onEgressRefused },
                  }),
            },
          )) {
            if (message.type === 'session.started' || message.type === 'session.resumed') agentSessionId = message.content.sessionId;
            if (room <= 0 && message.type !== 'terminal.completed' && message.type !== 'terminal.failed') {
              // Leaving the loop stops the agent's process tree before going on.
              full = true;
              break;
            }
            room -= 1;
            if (message.type === 'terminal.completed' || message.type === 'terminal.failed') terminal = message;
            yield message;
          }
          if (full) yield logFull(limit);
        } finally {
          await exportAgentState(attempt, writer, agentSessionId);
        }
      } finally {
        // The agent's process tree is gone: its fleet-limit slot goes back, and whoever it makes room for is woken.
        await releaseHold(terminal).catch(() => undefined);
        running.delete(done);
        ended();
      }
    };
  }
}

function startedIn(context: { turn: { promptId: string } | null; finishedPromptIds: string[] }, id: string): boolean {
  return context.turn?.promptId === id || context.finishedPromptIds.includes(id);
}

/** The terminal message of an attempt stopped because the session's message log is full. */
function logFull(limit: number): CliMessage {
  return {
    type: 'terminal.failed',
    content: {
      text: `the session's message log is full (maxLogMessages ${limit}): the attempt was stopped; nothing stored was removed, and the session takes no new prompt`,
      category: 'quota',
      stderr: '',
      invalid_output_lines: [],
    },
  };
}

function parseObject(raw: string | undefined): Record<string, unknown> {
  if (raw === undefined || raw === '') return {};
  try {
    const value = JSON.parse(raw) as unknown;
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
