import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { lifecycleLimits, loadConfig, type Config } from '../../config/config.ts';
import { createRedis, ensureLocalRedis, redactUrl } from '../../runtime/redis/index.ts';
import type { DeploymentPolicy } from '../../policy/index.ts';
import { deploymentPolicy } from '../../runtime/deployment-policy.ts';
import { Runtime } from '../../runtime/runtime.ts';

/** An error the CLI reports as one line on stderr, with its exit code. */
export class CliError extends Error {
  override readonly name = 'CliError';
  readonly exitCode: number;
  constructor(message: string, exitCode = 2) {
    super(message);
    this.exitCode = exitCode;
  }
}

export interface RuntimeContext {
  config: Config;
  /** The deployment policy of this configuration (checked when the configuration was loaded). */
  policy: DeploymentPolicy;
  url: string;
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
  let policy: DeploymentPolicy;
  try {
    config = loadConfig(flags);
    policy = deploymentPolicy(config);
  } catch (error) {
    throw new CliError(`configuration: ${(error as Error).message}`);
  }
  const url = await resolveRedisUrl(config);
  // Connections made here are closed with the context; one closed earlier (a follower that ended) leaves the set.
  const made = new Set<Redis>();
  const connect = (role: string): Redis => {
    const redis = createRedis(url, { role, maxRetriesPerRequest: null });
    made.add(redis);
    redis.once('end', () => made.delete(redis));
    return redis;
  };
  const runtime = new Runtime({ connect, prefix: config.prefix, policy, limits: lifecycleLimits(config), fleetLimits: config.limits });
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
    runtime,
    connect,
    async close() {
      await runtime.close().catch(() => undefined);
      made.forEach((r) => r.disconnect());
    },
  };
}
