import { createActor, type Actor, type Snapshot } from 'xstate';
import type { SessionMachine } from './session.machine.ts';
import type { SessionContext, SessionEvent } from './types.ts';

/** Bump when the persisted shape changes, and add a step to `migrate`. */
export const SESSION_SNAPSHOT_VERSION = 1;

export interface PersistedSession {
  version: number;
  /** XState's persisted snapshot of the session actor. */
  snapshot: PersistedMachineSnapshot;
}

interface PersistedMachineSnapshot {
  status: string;
  value: unknown;
  context: SessionContext;
  children?: Record<string, unknown>;
  [key: string]: unknown;
}

export interface Transition {
  at: number;
  from: string;
  to: string;
  event: string;
}

export type SessionActor = Actor<SessionMachine>;

export function persistSession(actor: SessionActor): PersistedSession {
  return {
    version: SESSION_SNAPSHOT_VERSION,
    snapshot: actor.getPersistedSnapshot() as unknown as PersistedMachineSnapshot,
  };
}

/** The state's name as operators see it (`running`, `backoff`, …). */
export function stateName(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/**
 * A snapshot as it may be handed to XState: never one that would re-invoke an
 * attempt. A snapshot taken while an attempt ran means that attempt was
 * interrupted; one taken while a cancel waited for the agent means the cancel
 * ends now (the runtime reaps any process left behind).
 */
export function restorableSnapshot(persisted: PersistedSession): PersistedMachineSnapshot {
  const migrated = migrate(persisted);
  const snapshot = migrated.snapshot;
  const value = stateName(snapshot.value);
  const rewritten = value === 'running' ? 'interrupted' : value === 'cancelling' ? 'cancelInterrupted' : value;
  return { ...snapshot, value: rewritten, children: {} };
}

function migrate(persisted: PersistedSession): PersistedSession {
  if (
    persisted === null ||
    typeof persisted !== 'object' ||
    typeof persisted.snapshot !== 'object' ||
    persisted.snapshot === null
  ) {
    throw new Error('persisted session: not a session snapshot');
  }
  if (persisted.version !== SESSION_SNAPSHOT_VERSION) {
    throw new Error(
      `persisted session: version ${String(persisted.version)} is not supported (this build reads version ${SESSION_SNAPSHOT_VERSION})`,
    );
  }
  return persisted;
}

type MachineSnapshotOf = Snapshot<unknown> & { value: unknown; context: SessionContext };

export interface SessionActorOptions {
  /** Called after every transition, with its timestamp. */
  onTransition?: (transition: Transition, snapshot: MachineSnapshotOf) => void;
}

/**
 * Starts a session actor, new (`input`) or restored (`persisted`). A restored
 * actor gets `session.restored` at once: in backoff it re-arms only the rest of
 * the delay (at once if `nextRetryAt` has passed); an interrupted attempt goes
 * through the retry decision. Nothing is re-invoked blindly.
 */
export function startSessionActor(
  machine: SessionMachine,
  from: { input: { sessionId: string; policy?: SessionContext['policy'] } } | { persisted: PersistedSession },
  options: SessionActorOptions = {},
): SessionActor {
  let previous: string | null = null;
  let logic = machine;
  const onTransition = options.onTransition;
  if (onTransition !== undefined) {
    // The transitions are seen by wrapping the machine's logic (its `transition` is what the actor
    // calls for every event, its own and its children's): XState's inspection would build an event
    // object for every event, microstep and actor of the system, which cost more than the rest.
    const record = (snapshot: MachineSnapshotOf, event: string): void => {
      const to = stateName(snapshot.value);
      if (to === previous && event !== 'session.restored') return;
      const transition = { at: Date.now(), from: previous ?? 'none', to, event };
      previous = to;
      onTransition(transition, snapshot);
    };
    const wrapped = Object.create(machine) as SessionMachine;
    // Each microstep is recorded: a turn that ends while the mailbox holds the next prompt goes running → completed →
    // running in one macrostep, and its end and the next turn's start are transitions of their own. `microstep` runs
    // the same macrostep as `transition` (XState 5: its last microstep is the snapshot `transition` returns; none: the
    // snapshot stays as it was).
    wrapped.transition = (snapshot, event, scope) => {
      const steps = machine.microstep(snapshot, event, scope);
      for (const step of steps) record(step as MachineSnapshotOf, event.type);
      return steps.at(-1) ?? snapshot;
    };
    if (!('persisted' in from)) {
      wrapped.getInitialSnapshot = (scope, input) => {
        const initial = machine.getInitialSnapshot(scope, input);
        record(initial as MachineSnapshotOf, 'xstate.init');
        return initial;
      };
    }
    logic = wrapped;
  }
  let actor: SessionActor;
  if ('persisted' in from) {
    const restored = restorableSnapshot(from.persisted);
    actor = createActor(logic, {
      snapshot: restored as never,
      input: { sessionId: from.persisted.snapshot.context.sessionId },
    });
    previous = stateName(restored.value);
  } else {
    actor = createActor(logic, { input: from.input });
  }
  actor.start();
  if ('persisted' in from) actor.send({ type: 'session.restored' } satisfies SessionEvent);
  return actor;
}
