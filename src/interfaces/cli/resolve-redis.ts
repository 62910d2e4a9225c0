import { join } from 'node:path';
import { ensureLocalRedis } from '../../runtime/redis/index.ts';
import { CliError } from './cli-error.ts';

/**
 * Finds Redis: REDIS_URL (or the config file's redisUrl), else a server on
 * 127.0.0.1:6379, else a redis-server started here with its data under the
 * state dir; when there is none, says how to get one.
 */
export async function resolveRedisUrl(config: { redisUrl?: string | undefined; stateDir: string }): Promise<string> {
  if (config.redisUrl !== undefined) return config.redisUrl;
  const local = await ensureLocalRedis({ dataDir: join(config.stateDir, 'redis') });
  if ('error' in local) throw new CliError(local.error, 2);
  return local.url;
}
