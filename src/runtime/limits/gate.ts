import type { FleetLimits } from './fleet-limits.ts';

/**
 * What a worker gives each session it drives for admission: the fleet limits, whether dispatch is
 * paused as far as this worker knows (then every attempt asks, limited or not), how often a waiter
 * looks again at the latest, how to wake sessions a release made room for, and which agents it runs.
 */
export interface AdmissionGate {
  limits: FleetLimits;
  pausedLocally: () => boolean;
  pollMs: number;
  wake: (sessionIds: readonly string[]) => void;
  /** Whether this worker runs `agent`: an attempt of an agent it does not offer is handed back, not run. */
  offers: (agent: string) => boolean;
  /** The session waits for a worker offering `agent` (recorded for the workers that do; see agent-waits.ts). */
  waitForAgent: (sessionId: string, agent: string, since: number) => Promise<void>;
  /** The session waited for `agent` and a worker offering it took it: it waits no more. */
  agentFound: (sessionId: string, agent: string) => Promise<void>;
}
