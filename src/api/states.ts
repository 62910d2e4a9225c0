import { SESSION_STATES as STATES } from '../../machines/states.ts';
import type { SessionState } from './types.ts';

/** Every state a session can be in: the session machine's (and `queued`, before its first prompt is taken). */
export const SESSION_STATES: readonly SessionState[] = Object.freeze([...STATES]);
