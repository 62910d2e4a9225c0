import type { Redis } from 'ioredis';
import type { ApprovalStore } from './approvals/store.ts';
import type { Keys } from './keys.ts';
import type { LifecycleLimits } from './lifecycle/limits.ts';
import type { FleetLimits } from './limits/fleet-limits.ts';
import type { PolicyStore } from './policy-store.ts';
import type { SessionQueue } from './queue.ts';
import type { Runtime } from './runtime.ts';
import type { SessionStore } from './store/session-store.ts';

/**
 * A Runtime's parts: its Redis connection, keys, store, queue, policy and approval stores, limits.
 * Private to the Runtime (the CLI, HTTP API and dashboard use its public methods and the client of
 * src/api, as a library user does); this module, which the package entry (src/index.ts) does not
 * export, is the way in for sessiond's own metrics and for tests that look at what is in Redis.
 */
export interface RuntimeInternals {
  readonly keys: Keys;
  readonly redis: Redis;
  readonly store: SessionStore;
  readonly queue: SessionQueue;
  readonly policies: PolicyStore;
  readonly approvals: ApprovalStore;
  readonly limits: LifecycleLimits;
  readonly fleetLimits: FleetLimits;
}

const INTERNALS = new WeakMap<object, RuntimeInternals>();

/** Called by the Runtime's constructor. */
export function exposeInternals(runtime: object, parts: RuntimeInternals): void {
  INTERNALS.set(runtime, parts);
}

/** The parts of `runtime` (made by `new Runtime`, or by createClient through it). */
export function internals(runtime: Runtime): RuntimeInternals {
  const parts = INTERNALS.get(runtime);
  if (parts === undefined) throw new TypeError('internals: not a sessiond Runtime');
  return parts;
}
