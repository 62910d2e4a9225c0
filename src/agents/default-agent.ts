import type { AgentName } from './registry.ts';

/** The agent of a session, a `run` or a `normalize` whose caller names none. */
export const DEFAULT_AGENT = 'pi' as const satisfies AgentName;
