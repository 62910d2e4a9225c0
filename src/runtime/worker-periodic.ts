import { SWEEP_INTERVAL_MS } from '../config/defaults.ts';
import type { RemoveDeps } from './lifecycle/remove.ts';
import { sweep } from './lifecycle/sweeper.ts';
import type { FleetLimits } from './limits/index.ts';
import { reconcileActivations } from './queue.ts';
import type { SessionStore } from './store/session-store.ts';
import type { WorkerOptions } from './worker-options.ts';

/** What the worker's periodic steps act on; `warn` makes the handler of a step that failed. */
export interface PeriodicSteps {
  options: WorkerOptions;
  store: SessionStore;
  fleetLimits: FleetLimits;
  lifecycle: RemoveDeps;
  heartbeat: () => Promise<void>;
  refreshPaused: () => Promise<void>;
  wake: (sessionIds: readonly string[]) => Promise<void>;
  log: NonNullable<WorkerOptions['log']>;
  warn: (message: string) => (error: unknown) => void;
  /** After each lifecycle sweep: what deleted sessions left of their workspaces goes too. */
  afterSweep: () => void;
}

/**
 * Starts the worker's periodic steps (heartbeat, lapsed fleet-limit holds, activations
 * reconciled, lifecycle sweep); returns their timers, for close() to clear.
 * Contract: never throws; a step that fails is said (`warn`) and tried again at its next turn.
 */
export function startPeriodicSteps(steps: PeriodicSteps): NodeJS.Timeout[] {
  const { options, warn } = steps;
  return [
    setInterval(
      () => void steps.heartbeat().catch(warn('heartbeat not written (tried again next beat)')),
      options.heartbeatMs,
    ),
    // Lapsed holds (a dead worker's) come back, and the waiters there is room for are woken.
    setInterval(
      () =>
        void steps
          .refreshPaused()
          .then(() => steps.fleetLimits.wakeable())
          .then((ids) => steps.wake(ids))
          .catch(warn('lapsed fleet-limit holds not looked at (looked at again every leaseTtlMs/3)')),
      Math.max(250, Math.floor(options.leaseTtlMs / 3)),
    ),
    setInterval(
      () =>
        void reconcileActivations(steps.store, options.queue).catch(
          warn('activations not reconciled (tried again next round)'),
        ),
      Math.max(5_000, options.leaseTtlMs),
    ),
    setInterval(
      () =>
        void sweep(steps.lifecycle, {
          retentionMs: options.retentionMs ?? 0,
          ...(options.sweepResumeAfterMs === undefined ? {} : { resumeAfterMs: options.sweepResumeAfterMs }),
        }).then((r) => {
          if (r.expired + r.resumed > 0)
            steps.log('info', 'lifecycle sweep', { expired: r.expired, resumed: r.resumed });
          steps.afterSweep();
        }, warn('lifecycle sweep failed (tried again next round)')),
      options.sweepIntervalMs ?? SWEEP_INTERVAL_MS,
    ),
  ];
}
