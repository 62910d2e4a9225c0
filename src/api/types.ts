import type { StateValueFrom } from 'xstate';
import type { sessionMachine } from '../../machines/session.machine.ts';
import type { CliMessage } from '../protocol/index.ts';

/** A message of a session's log: a CliMessage with its place (`seq` from 1, no gap) and the turn and attempt it belongs to. */
export type StoredMessage = CliMessage & { seq: number; turn: number; attempt: number };

/** The session machine's state names, taken from the machine itself. */
export type MachineState = Extract<StateValueFrom<typeof sessionMachine>, string>;

/** A session's state as `inspect` and `list` give it: a machine state, or `queued` before its first prompt is taken. */
export type SessionState = MachineState | 'queued';
