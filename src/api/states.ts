import { sessionMachine } from '../../machines/session.machine.ts';
import type { SessionState } from './types.ts';

/** Every state a session can be in, read from the session machine (and `queued`, before its first prompt is taken). */
export const SESSION_STATES: readonly SessionState[] = Object.freeze(['queued', ...(Object.keys(sessionMachine.root.states) as SessionState[])]);
