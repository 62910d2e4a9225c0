import { join } from 'node:path';
import type { DeploymentPolicy } from '../../policy/index.ts';
import { createWorkspaces } from '../../workspace/workspaces.ts';
import type { WorkspaceConfig, Workspaces } from '../../workspace/types.ts';
import { EventBus } from '../event-bus.ts';
import { FleetLimits } from '../limits/fleet-limits.ts';
import { PolicyStore } from '../policy-store.ts';
import { createSessionQueue, type SessionQueue } from '../queue.ts';
import type { RuntimeOptions } from './types.ts';
import { deploymentPolicy as defaultDeploymentPolicy } from '../deployment-policy.ts';
import { readerParts, type ReaderParts } from './reader-parts.ts';

export { checkSessionId, safeJson } from './reader-parts.ts';

/**
 * What every caller-side operation (the files of this folder) works with: the reader's parts (one
 * Redis connection for commands, the session and approval stores), the activation queue, the policy
 * store, the event bus (publishing only), the fleet limits, and the deployment policy.
 */
export interface CallerParts extends ReaderParts {
  queue: SessionQueue;
  policies: PolicyStore;
  bus: EventBus;
  fleetLimits: FleetLimits;
  /** The deployment's workspaces as this caller reaches them (RuntimeOptions.workspaces, built once; null: none configured). */
  workspaces: Workspaces | null;
  /** The deployment policy: the one given, else the default (this process's cwd as the workspace), resolved once. */
  deploymentPolicy(): Promise<DeploymentPolicy>;
}

export function callerParts(options: RuntimeOptions): CallerParts {
  const reader = readerParts(options);
  const { keys, redis } = reader;
  let policy: DeploymentPolicy | undefined = typeof options.policy === 'function' ? undefined : options.policy;
  const load = typeof options.policy === 'function' ? options.policy : undefined;
  const queue = createSessionQueue(() => options.connect('runtime-queue'), keys, {
    partitions: options.queuePartitions ?? 1,
  });
  return {
    ...reader,
    queue,
    // One count for the queue and the listings.
    fleetShards: queue.fleetShards,
    policies: new PolicyStore(redis, keys),
    // Publishing only: the subscriber connection is made lazily by those who listen.
    bus: new EventBus(redis, redis, keys),
    fleetLimits: new FleetLimits(redis, keys.prefix, options.fleetLimits ?? []),
    workspaces: options.workspaces === undefined ? null : createWorkspaces(callerWorkspaces(options.workspaces)),
    async deploymentPolicy() {
      policy ??= load !== undefined ? await load() : defaultDeploymentPolicy();
      return policy;
    },
  };
}

/**
 * A caller's git data apart from the workers' of the same host (`<gitDir>/callers`): a worker takes
 * its calls on a session for the only ones on the host (a lock file it finds is a killed call's and
 * goes) and writes the host's exclude list from its own configuration; an export or import runs at
 * any moment, a turn of the same session running, with the caller's configuration.
 */
function callerWorkspaces(config: WorkspaceConfig): WorkspaceConfig {
  return { ...config, gitDir: join(config.gitDir, 'callers') };
}
