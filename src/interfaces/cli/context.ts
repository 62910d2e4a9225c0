import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { lifecycleLimits, loadConfig, type Config } from '../../config/config.ts';
import { createRedis, ensureLocalRedis, redactUrl } from '../../runtime/redis/index.ts';
import type { DeploymentPolicy } from '../../policy/index.ts';
import { clientOf, type Client } from '../../api/client.ts';
import { Runtime } from '../../runtime/runtime.ts';
import { CliError } from './cli-error.ts';

export { CliError } from './cli-error.ts';

export interface RuntimeContext {
  config: Config;
  /** The deployment policy of this configuration, checked on first use (it loads the agents: a read-only command never does). */
  policy(): Promise<DeploymentPolicy>;
  url: string;
  /** The public client (src/api), over `runtime`: what the commands a library user also has go through. */
  client: Client;
  runtime: Runtime;
  connect: (role: string) => Redis;
  close(): Promise<void>;
}

/**
 * Finds Redis: REDIS_URL (or the config file's redisUrl), else a server on
 * 127.0.0.1:6379, else a redis-server started here with its data under the
 * state dir; when there is none, says how to get one.
 */
export async function resolveRedisUrl(config: Config): Promise<string> {
  if (config.redisUrl !== undefined) return config.redisUrl;
  const local = await ensureLocalRedis({ dataDir: join(config.stateDir, 'redis') });
  if ('error' in local) throw new CliError(local.error, 2);
  return local.url;
}

export async function openRuntime(flags: Record<string, unknown> = {}): Promise<RuntimeContext> {
  let config: Config;
  try {
    config = loadConfig(flags);
  } catch (error) {
    throw new CliError(`configuration: ${(error as Error).message}`);
  }
  let resolved: Promise<DeploymentPolicy> | null = null;
  const policy = (): Promise<DeploymentPolicy> =>
    (resolved ??= import('../../runtime/deployment-policy.ts')
      .then(({ deploymentPolicy }) => deploymentPolicy(config))
      .catch((error: Error) => Promise.reject(new CliError(`configuration: ${error.message}`))));
  const url = await resolveRedisUrl(config);
  // Connections made here are closed with the context; one closed earlier (a follower that ended) leaves the set.
  const made = new Set<Redis>();
  const connect = (role: string): Redis => {
    const redis = createRedis(url, { role, maxRetriesPerRequest: null });
    made.add(redis);
    redis.once('end', () => made.delete(redis));
    return redis;
  };
  const runtime = new Runtime({ connect, prefix: config.prefix, policy, limits: lifecycleLimits(config), queuePartitions: config.queue.partitions, fleetLimits: config.limits });
  try {
    await runtime.redis.ping();
  } catch (error) {
    made.forEach((r) => r.disconnect());
    throw new CliError(`cannot reach Redis at ${redactUrl(url)}: ${(error as Error).message}`, 2);
  }
  return {
    config,
    policy,
    url,
    client: clientOf(runtime),
    runtime,
    connect,
    async close() {
      await runtime.close().catch(() => undefined);
      made.forEach((r) => r.disconnect());
    },
  };
}
