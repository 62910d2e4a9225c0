import type { StateValueFrom } from 'xstate';
import type { sessionMachine } from './session.machine.ts';

/**
 * The one vocabulary of session states, the session machine's own: its type is derived from the
 * machine, and the list below is a plain literal (this module loads neither xstate nor the machine,
 * so `sessiond inspect` and `--help` do not), held equal to the machine's states by the compiler
 * (both ways, below) and by test/machines/states.test.ts (same names, same order). Adding a state
 * to `session.machine.ts` fails the build until it is added here; from here it reaches
 * `list --state`, the API's `state` filter, the per-state indexes and metrics, and the dashboard
 * (which gets this list injected).
 */

/** A top-level state of the session machine (`idle`, `running`, `backoff`, …). */
export type MachineState = Extract<StateValueFrom<typeof sessionMachine>, string>;

/** What a stored session can be in: a machine state, or `queued` (its first prompt not taken yet by a worker). */
export type SessionState = 'queued' | MachineState;

/** The machine's top-level states in the order the machine declares them. */
export const MACHINE_STATES = [
  'idle',
  'running',
  'backoff',
  'parked',
  'waiting',
  'cancelling',
  'interrupted',
  'cancelInterrupted',
  'completed',
  'failed',
  'cancelled',
] as const satisfies readonly MachineState[];

// Every machine state is in the list (the `satisfies` above: the list names only machine states).
type Unlisted = Exclude<MachineState, (typeof MACHINE_STATES)[number]>;
const everyStateListed: [Unlisted] extends [never] ? true : Unlisted = true;
void everyStateListed;

/** Every state a session can be listed, indexed or filtered by: `queued`, then the machine's states. */
export const SESSION_STATES: readonly SessionState[] = ['queued', ...MACHINE_STATES];

/** The states a turn settles in: it has ended, nothing runs until the next prompt. */
export const SETTLED_STATES = ['completed', 'failed', 'cancelled'] as const satisfies readonly MachineState[];

/** Nothing runs and no worker needs to hold the session: `idle` or a settled turn. */
export const QUIESCENT_MACHINE_STATES = ['idle', ...SETTLED_STATES] as const satisfies readonly MachineState[];

/** A quiescent session, `queued` included (no turn has started). */
export const QUIESCENT_STATES = ['queued', ...QUIESCENT_MACHINE_STATES] as const satisfies readonly SessionState[];

/** An attempt's process may be alive in these states (its tree must be stopped before the session is let go). */
export const ATTEMPT_STATES = ['running', 'cancelling'] as const satisfies readonly MachineState[];

/** Reached only by restoring a snapshot taken while an attempt ran (or a cancel waited for it). */
export const RESTORE_ONLY_STATES = ['interrupted', 'cancelInterrupted'] as const satisfies readonly MachineState[];

export function isSessionState(value: string): value is SessionState {
  return (SESSION_STATES as readonly string[]).includes(value);
}

export function isSettledState(value: string): value is (typeof SETTLED_STATES)[number] {
  return (SETTLED_STATES as readonly string[]).includes(value);
}

export function isAttemptState(value: string | null | undefined): value is (typeof ATTEMPT_STATES)[number] {
  return value !== null && value !== undefined && (ATTEMPT_STATES as readonly string[]).includes(value);
}
