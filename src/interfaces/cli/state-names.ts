import { SESSION_STATES } from '../../../machines/states.ts';

/**
 * The session states `list --state` offers: `queued` and the machine's states, from
 * machines/states.ts (a plain list: `sessiond --help` loads neither xstate nor the machine).
 * test/machines/states.test.ts keeps them equal to the machine's own states.
 */
export const LIST_STATES: readonly string[] = SESSION_STATES;
