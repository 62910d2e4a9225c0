import { createAttemptActors } from '../../machines/attempt-actor.ts';
import { persistSession, startSessionActor, stateName, type PersistedSession, type SessionActor, type Transition } from '../../machines/restore.ts';
import { withAttemptActors } from '../../machines/session.machine.ts';
import type { AttemptRunner, MessageSink } from '../../machines/types.ts';
import { agentDefinition, isAgentName, type AgentName } from '../agents/registry.ts';
import type { RetryPolicy } from '../retry/index.ts';
import type { EventBus } from './event-bus.ts';
import { newMarker, type ProcessRegistry } from './orphans.ts';
import { SessionWriter } from './session-writer.ts';
import type { SessionStore } from './store/session-store.ts';

/** States in which the session needs nothing more from this worker. */
const QUIESCENT = new Set(['idle', 'completed', 'failed', 'cancelled']);

export interface ActiveSessionConfig {
  /** Agent options that belong to the worker's host (command, agent dir, session dir, env…), per agent. */
  agentOptions: Readonly<Record<string, Readonly<Record<string, unknown>>>>;
  /** A backoff longer than this gives the worker slot back and parks the job until `nextRetryAt`. */
  holdBackoffMs: number;
  leaseTtlMs: number;
  /** How often the holder looks at the inbox and the cancel flag even without a pub/sub event. */
  pollMs: number;
}

export type DriveOutcome =
  | { kind: 'released' }
  | { kind: 'parked'; until: number }
  | { kind: 'stale' }
  | { kind: 'interrupted' };

/**
 * Drives one session while this worker holds its lease: restores the actor from
 * Redis, feeds it the inbox, persists every transition and every message
 * (batched, fenced), and gives the session back when there is nothing left to do.
 */
export class ActiveSession {
  readonly #store: SessionStore;
  readonly #bus: EventBus;
  readonly #procs: ProcessRegistry;
  readonly #sessionId: string;
  readonly #token: string;
  readonly #config: ActiveSessionConfig;
  readonly #globalPolicy: () => Promise<RetryPolicy>;
  readonly #writer: SessionWriter;
  #actor: SessionActor | null = null;
  #settled: () => Promise<void> = async () => undefined;
  #wake: (() => void) | null = null;
  #stale = false;
  #interruptRequested = false;
  #draining = false;
  #checkInbox = true;
  #checkCancel = true;
  #checkPolicy = true;
  #meta: Record<string, string> = {};

  constructor(init: {
    store: SessionStore;
    bus: EventBus;
    procs: ProcessRegistry;
    sessionId: string;
    token: string;
    config: ActiveSessionConfig;
    globalPolicy: () => Promise<RetryPolicy>;
  }) {
    this.#store = init.store;
    this.#bus = init.bus;
    this.#procs = init.procs;
    this.#sessionId = init.sessionId;
    this.#token = init.token;
    this.#config = init.config;
    this.#globalPolicy = init.globalPolicy;
    this.#writer = new SessionWriter(init.store, init.sessionId, init.token);
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
    }
  }

  async #start(): Promise<void> {
    this.#meta = (await this.#store.meta(this.#sessionId)) ?? {};
    const raw = await this.#store.snapshot(this.#sessionId);
    const actors = createAttemptActors(this.#runner(), this.#sink());
    this.#settled = actors.settled;
    const machine = withAttemptActors(actors);
    const onTransition = (transition: Transition): void => this.#writer.history(transition);
    const policy = await this.#policy();
    this.#actor =
      raw === null
        ? startSessionActor(machine, { input: { sessionId: this.#sessionId, policy } }, { onTransition })
        : startSessionActor(machine, { persisted: JSON.parse(raw) as PersistedSession }, { onTransition });
    this.#actor.subscribe({
      next: () => {
        this.#persist();
        this.#poke();
      },
      error: () => this.#poke(),
    });
    this.#persist();
  }

  #persist(): void {
    const actor = this.#actor;
    if (actor === null || this.#stale) return;
    const snapshot = actor.getSnapshot();
    this.#writer.snapshot(JSON.stringify(persistSession(actor)), stateName(snapshot.value));
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
      const snapshot = actor.getSnapshot();
      const state = stateName(snapshot.value);
      if (this.#draining && state !== 'running' && state !== 'cancelling') return this.#stopInterrupted();
      if (state === 'backoff') {
        const until = snapshot.context.nextRetryAt ?? Date.now();
        if (until - Date.now() > this.#config.holdBackoffMs) return this.#park(until);
      }
      if (QUIESCENT.has(state) && snapshot.context.mailbox.length === 0) {
        const released = await this.#release('idle');
        if (released !== null) return released;
        // Prompts or a cancel arrived meanwhile: take them in before trying again.
        this.#checkInbox = true;
        this.#checkCancel = true;
        continue;
      }
      await this.#nextWake();
    }
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

  async #policy(): Promise<RetryPolicy> {
    const override = this.#meta.policy;
    if (override !== undefined && override !== '') return JSON.parse(override) as RetryPolicy;
    return this.#globalPolicy();
  }

  async #applyPolicy(): Promise<void> {
    this.#checkPolicy = false;
    this.#meta = (await this.#store.meta(this.#sessionId)) ?? this.#meta;
    const policy = await this.#policy();
    const actor = this.#actor;
    if (actor !== null && JSON.stringify(actor.getSnapshot().context.policy) !== JSON.stringify(policy)) {
      actor.send({ type: 'session.policy', policy });
    }
  }

  async #applyCancel(): Promise<void> {
    this.#checkCancel = false;
    const request = await this.#store.cancelRequest(this.#sessionId);
    const actor = this.#actor;
    if (request === null || actor === null) return;
    actor.send({ type: 'session.cancel', reason: request.reason });
    this.#writer.cancelHandled();
    this.#persist();
  }

  async #pullInbox(): Promise<void> {
    this.#checkInbox = false;
    if (this.#interruptRequested || this.#draining) return;
    const prompts = await this.#store.inbox(this.#sessionId);
    const actor = this.#actor;
    if (prompts.length === 0 || actor === null) return;
    const sessionOptions = parseObject(this.#meta.options);
    for (const prompt of prompts) {
      actor.send({ type: 'session.prompt', prompt: { id: prompt.id, text: prompt.text, options: { ...sessionOptions, ...prompt.options } } });
    }
    this.#writer.inboxConsumed(prompts.length);
    this.#persist();
  }

  /** Gives the lease back; `null` when prompts or a cancel arrived meanwhile (still held). */
  async #release(mode: 'idle' | 'keep'): Promise<DriveOutcome | null> {
    try {
      await this.#writer.flush();
    } catch {
      return this.#stopStale();
    }
    const result = await this.#store.release(this.#sessionId, this.#token, mode);
    if (result === -1) return this.#stopStale();
    if (result === 0) return null;
    this.#actor?.stop();
    return { kind: 'released' };
  }

  async #park(until: number): Promise<DriveOutcome> {
    const released = await this.#release('keep');
    if (released?.kind !== 'released') return released ?? { kind: 'stale' };
    return { kind: 'parked', until };
  }

  async #stopInterrupted(): Promise<DriveOutcome> {
    // The snapshot in Redis still says which attempt ran: the next activation records it as interrupted.
    this.#actor?.stop();
    await this.#settled();
    await this.#writer.flush().catch(() => undefined);
    await this.#store.release(this.#sessionId, this.#token, 'keep');
    return { kind: 'interrupted' };
  }

  async #stopStale(): Promise<DriveOutcome> {
    this.#stale = true;
    this.#actor?.stop();
    await this.#settled();
    return { kind: 'stale' };
  }

  #sink(): MessageSink {
    return (message, meta) => this.#writer.message(meta.turn, meta.attempt, message.type, message.content);
  }

  #runner(): AttemptRunner {
    const store = this.#store;
    const procs = this.#procs;
    const writer = this.#writer;
    const config = this.#config;
    const sessionId = this.#sessionId;
    return async function* runAttempt(request, { signal }) {
      // The snapshot saying this attempt runs is in Redis before the agent starts.
      await writer.flush();
      const agentName = (typeof request.options.agent === 'string' ? request.options.agent : 'pi') as string;
      if (!isAgentName(agentName)) throw new Error(`unknown agent "${agentName}"`);
      const agent = agentDefinition(agentName as AgentName);
      const { agent: _agent, ...turnOptions } = request.options;
      const options = { ...(config.agentOptions[agentName] ?? {}), ...turnOptions };
      const stateField = (id: string) => `${agentName}:${id}`;
      if (request.agentSessionId !== null && agent.importState !== undefined) {
        const state = await store.agentState(sessionId, stateField(request.agentSessionId));
        if (state !== null) await agent.importState(options, request.agentSessionId, state);
      }
      const marker = newMarker();
      await procs.record(marker, sessionId);
      let agentSessionId = request.agentSessionId;
      try {
        for await (const message of agent.run(
          { text: request.text, resumeSessionId: request.agentSessionId, options },
          { signal, marker, onSpawn: (p) => void procs.spawned(marker, p.pid, p.startTime).catch(() => undefined) },
        )) {
          if (message.type === 'session.started' || message.type === 'session.resumed') agentSessionId = message.content.sessionId;
          yield message;
        }
      } finally {
        await procs.done(marker).catch(() => undefined);
        if (agentSessionId !== null && agent.exportState !== undefined) {
          const state = await agent.exportState(options, agentSessionId).catch(() => null);
          if (state !== null) writer.agentState(stateField(agentSessionId), state);
        }
      }
    };
  }
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
