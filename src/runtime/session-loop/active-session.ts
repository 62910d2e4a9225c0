import { startSessionActor, stateName, type PersistedSession, type SessionActor } from '../../../machines/restore.ts';
import { isAttemptState } from '../../../machines/states.ts';
import { timeoutText, turnDeadline } from '../../../machines/turn.ts';
import type { RetryPolicy } from '../../retry/index.ts';
import { ApprovalStore } from '../approvals/store.ts';
import type { EventBus } from '../event-bus.ts';
import { RESUME_FIELD } from '../resume-parked.ts';
import type { SharedSessionMachine } from '../shared-machine.ts';
import type { LoadedSession, SessionStore } from '../store/session-store.ts';
import { SessionTracer } from '../tracing/session-tracer.ts';
import { Admission } from './admission.ts';
import { interruptedEnd, type AttemptStop } from './attempt-end.ts';
import { attemptRunner } from './attempt-runner.ts';
import { sessionLog, type ActiveSessionConfig, type DriveOutcome, type WarnLog } from './config.ts';
import { HolderInbox } from './inbox.ts';
import { FencedSession, QUIESCENT, type HeldSession } from './lease.ts';
import { SessionSink } from './message-sink.ts';
import { applyUnqueue, dropRemoved, PromptFeed } from './prompts.ts';
import { applyResume, CancelRequests, TurnPolicy } from './requests.ts';
import { transitionRecorder } from './transitions.ts';

export type { ActiveSessionConfig, DriveOutcome, SessionEvents } from './config.ts';

/**
 * Drives one session while this worker holds its lease: restores the actor from Redis, feeds it
 * what arrives in its inbox, persists every transition and every message (batched, fenced), and
 * gives the session back when there is nothing left to do. The parts: the inbox (inbox.ts), the
 * requests it reads (prompts.ts, requests.ts), admission under fleet limits (admission.ts), the
 * attempt runner (attempt-runner.ts), the message sink and usage (message-sink.ts, usage.ts), the
 * fenced writes and the lease (lease.ts).
 */
export class ActiveSession {
  readonly #store: SessionStore;
  readonly #bus: EventBus;
  readonly #config: ActiveSessionConfig;
  readonly #held: HeldSession;
  readonly #fenced: FencedSession;
  readonly #inbox = new HolderInbox();
  readonly #prompts: PromptFeed;
  readonly #cancels: CancelRequests;
  readonly #policy: TurnPolicy;
  readonly #admission: Admission;
  readonly #sink: SessionSink;
  readonly #machine: SharedSessionMachine;
  readonly #token: string;
  readonly #approvals: ApprovalStore;
  readonly #tracer: SessionTracer | null;
  readonly #warn: WarnLog;
  /** Read with the lease: the meta and snapshot to start from (null: read Redis). */
  #loaded: LoadedSession | null;
  #interruptRequested = false;
  #draining = false;
  /** The runner generators of this session still running (aborted ones included). */
  readonly #running = new Set<Promise<void>>();
  #detach: () => void = () => undefined;
  /** Approval requests may be stored for this session (asked in this activation, or restored mid-turn): cleared when the turn is over. */
  #approvalsUsed = false;

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
    const { store, sessionId, config } = init;
    this.#store = store;
    this.#bus = init.bus;
    this.#config = config;
    this.#warn = sessionLog(config.log, sessionId);
    this.#fenced = new FencedSession(store, sessionId, init.token, () => this.markStale());
    this.#held = { sessionId, store, fenced: this.#fenced, meta: {} };
    this.#token = init.token;
    this.#approvals = new ApprovalStore(store.redis, store.keys);
    this.#loaded = init.loaded ?? null;
    this.#prompts = new PromptFeed(init.loaded?.inbox);
    this.#cancels = new CancelRequests(init.loaded?.cancel);
    this.#policy = new TurnPolicy(init.globalPolicy, config.policy);
    this.#machine = init.machine;
    this.#admission = new Admission({
      sessionId,
      gate: config.gate,
      agentOptions: config.agentOptions,
      holdTtlMs: config.leaseTtlMs ?? 30_000,
      meta: () => this.#held.meta,
      warn: this.#warn,
    });
    const tracing = config.tracing ?? null;
    this.#tracer =
      tracing === null
        ? null
        : new SessionTracer(tracing, sessionId, config.workerId ?? init.token.split('#')[0] ?? '');
    this.#sink = new SessionSink({
      sessionId,
      writer: this.#fenced.writer,
      tracer: this.#tracer,
      events: config.events,
      usageLabels: () => this.#usageLabels(),
      warn: this.#warn,
    });
  }

  get sessionId(): string {
    return this.#held.sessionId;
  }

  /** Stop driving now: the attempt (if any) is stopped and stays recorded as running, so its next activation sees it interrupted. */
  interrupt(): void {
    this.#interruptRequested = true;
    this.#inbox.poke();
  }

  /** The worker is shutting down: let a running attempt go on, but start nothing new; give the session back as soon as no attempt runs. */
  drain(): void {
    this.#draining = true;
    this.#inbox.poke();
  }

  /** The global retry policy changed. */
  refreshPolicy(): void {
    this.#inbox.ask('policy');
    this.#inbox.poke();
  }

  /** The lease was lost: write nothing more, stop the agent. */
  markStale(): void {
    this.#fenced.stale = true;
    this.#inbox.poke();
  }

  /** Self-fenced: the lease was not renewed in time (it may lapse soon). Nothing more is written or started; the agent goes. */
  fence(): void {
    this.#fenced.writer.fence();
    this.markStale();
  }

  /** Renewed with the session's lease: the hold of a worker that dies lapses with it. */
  renewHold(): void {
    this.#admission.renew();
  }

  async drive(): Promise<DriveOutcome> {
    this.#inbox.listen(this.#bus, this.sessionId, this.#config.pollMs);
    try {
      await this.#start();
      return await this.#loop();
    } finally {
      this.#inbox.close();
      await this.#settled().catch((error: unknown) =>
        this.#warn('an attempt ended with an error while the holder let go', error),
      );
      this.#detach();
      await this.#admission.letGo(this.#fenced.actor, this.#fenced.stale);
    }
  }

  #trace(): void {
    const actor = this.#fenced.actor;
    if (this.#tracer === null || actor === null) return;
    this.#tracer.observe(actor.getSnapshot().context, this.#usageLabels());
  }

  #usageLabels(): { agent: string; model: string } {
    return this.#admission.usageLabels(this.#fenced.actor?.getSnapshot().context.turn?.options ?? {});
  }

  async #start(): Promise<void> {
    const held = this.#held;
    const loaded = this.#loaded;
    held.meta = loaded !== null ? loaded.meta : ((await this.#store.meta(this.sessionId)) ?? {});
    const raw = loaded !== null ? loaded.snapshot : await this.#store.snapshot(this.sessionId);
    const persisted = raw === null ? null : (JSON.parse(raw) as PersistedSession);
    // Queued prompts an operator removed leave the mailbox before the actor runs (no turn can start first).
    if (persisted !== null) await dropRemoved(held, persisted);
    this.#tracer?.restore(held.meta.trace, persisted?.snapshot.context ?? null);
    // An attempt its worker left (stopped, crashed) gets the end its log is missing, before anything else is written.
    if (persisted !== null) await this.#endInterrupted(persisted);
    this.#detach = this.#machine.attach(this.sessionId, this.#runner(), this.#sink.sink, (options) =>
      this.#admission.required(options),
    );
    const machine = this.#machine.machine;
    const restored = persisted?.snapshot.context ?? null;
    const onTransition = transitionRecorder(
      { sessionId: this.sessionId, writer: this.#fenced.writer, events: this.#config.events, warn: this.#warn },
      restored,
    );
    const policy = await this.#policy.of(held.meta);
    const actor: SessionActor =
      persisted === null
        ? startSessionActor(machine, { input: { sessionId: this.sessionId, policy } }, { onTransition })
        : startSessionActor(machine, { persisted }, { onTransition });
    this.#fenced.bind(actor);
    if (loaded !== null) {
      // The meta was read with the lease just now: the first policy check needs no second read
      // (and a new actor was just given this very policy).
      this.#inbox.skip('policy');
      if (persisted !== null) this.#policy.sync(held, policy);
    }
    actor.subscribe({
      next: () => {
        this.#fenced.persist();
        this.#trace();
        this.#inbox.poke();
      },
      error: () => this.#inbox.poke(),
    });
    // What the restore itself recorded (an attempt found interrupted) is traced too.
    this.#trace();
    if (persisted === null) {
      // A new session: nothing to write yet; its first snapshot goes with the first prompt's write.
      this.#fenced.stage();
    } else {
      const state = stateName(persisted.snapshot.value);
      this.#fenced.restoredIn(state);
      if (!QUIESCENT.has(state)) this.#approvalsUsed = true;
      this.#fenced.persist();
    }
    // A resume asked for while nobody held the session (its activation was promoted for it).
    if (held.meta[RESUME_FIELD] !== undefined) this.#inbox.ask('resume');
    else this.#inbox.skip('resume');
  }

  /**
   * The snapshot was taken while an attempt ran (or a cancel waited for it): the restore records that attempt
   * interrupted (or cancelled), and its log gets the same end: the tool calls it left open closed, then its
   * terminal message (attempt-end.ts). Written with the restore's first write, so before any later attempt's.
   */
  async #endInterrupted(persisted: PersistedSession): Promise<void> {
    const { value, context } = persisted.snapshot;
    const state = stateName(value);
    if ((state !== 'running' && state !== 'cancelling') || context.turn === null) return;
    const stop: AttemptStop | null =
      state === 'running'
        ? null
        : context.turn.timedOut === true
          ? { kind: 'timeout', text: timeoutText(context) }
          : { kind: 'cancelled', reason: context.turn.cancelReason ?? 'cancelled' };
    const { turnIndex: turn, attempt } = context;
    const stored = await this.#store.readLastAttempt(this.sessionId, turn, attempt);
    // Through the sink, as the attempt's own messages go: a `terminal.failed` written here is told (attemptFailed).
    for (const message of interruptedEnd({ turn, attempt, stop }, stored)) {
      const flushed = this.#sink.sink(message, { sessionId: this.sessionId, turn, attempt });
      if (flushed !== undefined) await flushed;
    }
  }

  async #loop(): Promise<DriveOutcome> {
    const actor = this.#fenced.actor;
    if (actor === null) throw new Error('not started');
    const inbox = this.#inbox;
    const held = this.#held;
    for (;;) {
      if (this.#fenced.stale || this.#fenced.writer.failure !== null) return this.#stopStale();
      if (this.#interruptRequested) return this.#stopInterrupted();
      if (inbox.take('policy')) await this.#policy.apply(held);
      // Prompts first: a cancel requested while nobody held the session is meant for the turn its
      // queued prompt starts (applied the other way round, it would hit an idle actor and be lost).
      if (inbox.take('prompt') && !this.#interruptRequested && !this.#draining) await this.#prompts.pull(held);
      if (inbox.take('cancel')) await this.#cancels.apply(held, () => this.#sink.answered);
      if (inbox.take('unqueue')) await applyUnqueue(held, this.#warn);
      if (inbox.take('resume')) await applyResume(held, this.#warn);
      const snapshot = actor.getSnapshot();
      const state = stateName(snapshot.value);
      // A session with nothing left to do is given back as done, also while the worker shuts down
      // (handed back as interrupted, it would cost another activation that finds nothing to do).
      if (QUIESCENT.has(state) && snapshot.context.mailbox.length === 0) {
        if (this.#approvalsUsed) {
          // The turn is over: requests still waiting go with the agent that asked them.
          this.#approvalsUsed = false;
          await this.#approvals
            .clear(this.sessionId, this.#token)
            .catch((error: unknown) => this.#warn("the ended turn's approval requests were not cleared", error));
        }
        const released = await this.#release('idle');
        if (released !== null) return released;
        // Steers the ended turn did not take (accepted as it ended) are the next turns, never lost.
        if (await this.#steersToTurns()) inbox.ask('prompt');
        // Prompts or a cancel arrived meanwhile: take them in before trying again (not while draining).
        if (!this.#draining) {
          inbox.ask('prompt');
          inbox.ask('cancel');
          continue;
        }
      }
      if (this.#draining && !isAttemptState(state)) return this.#stopInterrupted();
      if (state === 'waiting') {
        const until = await this.#admission.admit(actor);
        if (until !== null) return this.#park(until);
        continue;
      }
      if (state === 'backoff' || state === 'parked') {
        // Parked (a long backoff, a quota wall), the session wakes at its retry or at its turn's wall-clock limit, whichever comes first.
        const deadline = turnDeadline(snapshot.context);
        const until = Math.min(snapshot.context.nextRetryAt ?? Date.now(), deadline ?? Number.POSITIVE_INFINITY);
        if (until - Date.now() > this.#config.holdBackoffMs) return this.#park(until);
      }
      await inbox.next();
    }
  }

  /** Resolves once every attempt of this session started so far has fully ended (aborted ones included). */
  async #settled(): Promise<void> {
    await Promise.all([...this.#running]);
  }

  /** Moves the steers still pending into the inbox as the next turns (fenced); true when there were any. */
  async #steersToTurns(): Promise<boolean> {
    try {
      return (await this.#store.steersToTurns(this.sessionId, this.#token)) > 0;
    } catch (error) {
      // Stale (the loop stops at its next pass) or Redis unreachable: they stay pending, moved on the next try.
      if ((error as Error).name === 'StaleLeaseError') this.markStale();
      else this.#warn('the pending steers of an ended turn were not made its next turns yet', error);
      return false;
    }
  }

  /** Gives the lease back; `null` when prompts, a cancel or steers arrived meanwhile (still held). */
  async #release(mode: 'idle' | 'keep'): Promise<DriveOutcome | null> {
    let result: 1 | 0;
    try {
      result = await this.#fenced.release(mode);
    } catch (error) {
      this.#warn('the lease was not given back: the session is treated as lost', error);
      return this.#stopStale();
    }
    if (result === 0) return null;
    this.#fenced.stopActor();
    return { kind: 'released' };
  }

  async #park(until: number): Promise<DriveOutcome> {
    const released = await this.#release('keep');
    if (released?.kind !== 'released') return released ?? { kind: 'stale' };
    return { kind: 'parked', until };
  }

  async #stopInterrupted(): Promise<DriveOutcome> {
    // The snapshot in Redis still says which attempt ran: the next activation records it as interrupted.
    this.#fenced.stopActor();
    await this.#settled();
    await this.#fenced
      .release('keep')
      .catch((error: unknown) =>
        this.#warn('the lease of an interrupted session was not given back (it lapses)', error),
      );
    return { kind: 'interrupted' };
  }

  async #stopStale(): Promise<DriveOutcome> {
    this.#fenced.stale = true;
    this.#fenced.stopActor();
    await this.#settled();
    return { kind: 'stale' };
  }

  #runner() {
    return attemptRunner({
      store: this.#store,
      writer: this.#fenced.writer,
      config: this.#config,
      sessionId: this.sessionId,
      token: this.#token,
      approvals: this.#approvals,
      tracer: this.#tracer,
      running: this.#running,
      releaseHold: (terminal) => this.#admission.releaseHold(terminal),
      approvalStored: () => {
        this.#approvalsUsed = true;
      },
      onDecision: (listener) => this.#inbox.onApproval(listener),
      onSteer: (listener) => this.#inbox.onSteer(listener),
      warn: this.#warn,
      retryPolicy: () => this.#fenced.actor?.getSnapshot().context.policy ?? null,
      stopOf: (turn, attempt) => this.#stopOf(turn, attempt),
      answered: () => this.#sink.answered,
      setAnswerRecord: (turn, attempt, record) => this.#sink.setAnswerRecord(turn, attempt, record),
    });
  }

  /** Why the machine stopped this attempt; null when it did not (the holder let go: the actor stopped in `running`). */
  #stopOf(turn: number, attempt: number): AttemptStop | null {
    const actor = this.#fenced.actor;
    if (actor === null || this.#fenced.stale) return null;
    const snapshot = actor.getSnapshot();
    const { context } = snapshot;
    if (stateName(snapshot.value) !== 'cancelling' || context.turnIndex !== turn || context.attempt !== attempt)
      return null;
    if (context.turn?.timedOut === true) return { kind: 'timeout', text: timeoutText(context) };
    return { kind: 'cancelled', reason: context.turn?.cancelReason ?? 'cancelled' };
  }
}
