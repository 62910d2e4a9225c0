import type { Redis } from 'ioredis';
import { InputError } from '../../errors.ts';
import type { DeploymentPolicy } from '../../policy/index.ts';
import { ApprovalStore } from '../approvals/store.ts';
import { EventBus } from '../event-bus.ts';
import { createKeys, SESSION_ID_PATTERN, type Keys } from '../keys.ts';
import { LIFECYCLE_DEFAULTS, type LifecycleLimits } from '../lifecycle/limits.ts';
import { FleetLimits } from '../limits/fleet-limits.ts';
import { PolicyStore } from '../policy-store.ts';
import { createSessionQueue, type SessionQueue } from '../queue.ts';
import { SessionStore } from '../store/session-store.ts';
import type { RuntimeOptions } from './types.ts';
import { deploymentPolicy as defaultDeploymentPolicy } from '../deployment-policy.ts';

/**
 * What every caller-side operation (the files of this folder) works with: one Redis connection for
 * commands, the session store, the activation queue, the policy and approval stores, the event bus
 * (publishing only), the deployment's lifecycle limits and fleet limits, and the deployment policy.
 */
export interface CallerParts {
  keys: Keys;
  redis: Redis;
  store: SessionStore;
  queue: SessionQueue;
  policies: PolicyStore;
  approvals: ApprovalStore;
  bus: EventBus;
  limits: LifecycleLimits;
  fleetLimits: FleetLimits;
  connect: (role: string) => Redis;
  /** The deployment policy: the one given, else the default (this process's cwd as the workspace), resolved once. */
  deploymentPolicy(): Promise<DeploymentPolicy>;
}

export function callerParts(options: RuntimeOptions): CallerParts {
  const keys = createKeys(options.prefix ?? 'sessiond');
  const redis = options.connect('runtime');
  const limits = { ...LIFECYCLE_DEFAULTS, ...options.limits };
  let policy: DeploymentPolicy | undefined = typeof options.policy === 'function' ? undefined : options.policy;
  const load = typeof options.policy === 'function' ? options.policy : undefined;
  return {
    keys,
    redis,
    store: new SessionStore(redis, keys, { retentionMs: limits.retentionMs }),
    queue: createSessionQueue(() => options.connect('runtime-queue'), keys, {
      partitions: options.queuePartitions ?? 1,
    }),
    policies: new PolicyStore(redis, keys),
    approvals: new ApprovalStore(redis, keys),
    // Publishing only: the subscriber connection is made lazily by those who listen.
    bus: new EventBus(redis, redis, keys),
    limits,
    fleetLimits: new FleetLimits(redis, keys.prefix, options.fleetLimits ?? []),
    connect: options.connect,
    async deploymentPolicy() {
      policy ??= load !== undefined ? await load() : defaultDeploymentPolicy();
      return policy;
    },
  };
}

export function checkSessionId(sessionId: string): void {
  if (!SESSION_ID_PATTERN.test(sessionId))
    throw new InputError([
      {
        field: 'sessionId',
        message: `must be 1-100 letters, digits or _.-, and not . or .. (got ${JSON.stringify(sessionId)})`,
      },
    ]);
}

export function safeJson(raw: string | undefined): unknown {
  if (raw === undefined) return {};
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    // Written by sessiond as JSON, so only a hand-edited value fails here: it reads as empty ({}).
    return {};
  }
}
