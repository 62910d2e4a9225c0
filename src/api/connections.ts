import type { Redis } from 'ioredis';
import { createRedis } from '../runtime/redis/connection.ts';

/** Where Redis is: a URL (`redis://…`, `rediss://…`), or a function making a new connection (sessiond opens several). */
export type RedisOption = string | ((role: string) => Redis);

/** A connection factory from the option; the connections it makes are closed by `closeAll`. */
export function connections(redis: RedisOption): { connect: (role: string) => Redis; closeAll: () => void } {
  const made = new Set<Redis>();
  const connect = (role: string): Redis => {
    const connection =
      typeof redis === 'string' ? createRedis(redis, { role, maxRetriesPerRequest: null }) : redis(role);
    made.add(connection);
    connection.once('end', () => made.delete(connection));
    return connection;
  };
  return { connect, closeAll: () => made.forEach((c) => c.disconnect()) };
}
