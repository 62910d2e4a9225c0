import type { FleetLimits } from './fleet-limits.ts';

/**
 * What a worker gives each session it drives for admission: the fleet limits, whether dispatch is
 * paused as far as this worker knows (then every attempt asks, limited or not), how often a waiter
 * looks again at the latest, and how to wake sessions a release made room for.
 */
export interface AdmissionGate {
  limits: FleetLimits;
  pausedLocally: () => boolean;
  pollMs: number;
  wake: (sessionIds: readonly string[]) => void;
}
