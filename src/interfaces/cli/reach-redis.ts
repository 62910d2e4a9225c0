import type { Redis } from 'ioredis';
import { redactUrl } from '../../runtime/redis/index.ts';
import { CliError } from './cli-error.ts';

/** How long a command waits for Redis's first answer before it says so. */
export const REDIS_REACH_MS = 5_000;

/** The connection factory with the last connection error any of its connections reported. */
export function trackingErrors(connect: (role: string) => Redis): {
  connect: (role: string) => Redis;
  lastError: () => string | null;
} {
  let last: string | null = null;
  return {
    connect(role) {
      const connection = connect(role);
      connection.on('error', (error: Error) => {
        last = (error as NodeJS.ErrnoException).code ?? error.message;
      });
      return connection;
    },
    lastError: () => last,
  };
}

/** What to do when Redis does not answer. */
export const REDIS_FIXES: readonly string[] = [
  "Is it running? Start one: redis-server --port 6379 --save ''  (`sessiond demo` starts one for you)",
  'Another server: REDIS_URL=redis://HOST:PORT (a password: redis://:PASSWORD@HOST:PORT, TLS: rediss://), or `redisUrl` in the configuration file',
  'Check it: redis-cli -u URL ping',
];

/** Redis does not answer at `url` (password masked): why, and what to do. */
export function redisHelp(url: string, reason: string): string {
  return [`cannot reach Redis at ${redactUrl(url)}: ${reason}`, ...REDIS_FIXES.map((fix) => `  ${fix}`)].join('\n');
}

export interface ReachOptions {
  /**
   * A server command (worker, serve): instead of failing, says once that Redis does not answer and
   * how to fix it, and keeps waiting (its connections keep retrying).
   */
  keepTrying?: (help: string) => void;
  /** @default REDIS_REACH_MS */
  withinMs?: number;
}

/**
 * Waits for Redis's first answer (`ping`). A command gives up after `withinMs` (or on an error)
 * with a CliError naming the URL and the likely fixes, its connections closed; a server command
 * says so once and goes on waiting.
 */
export async function reachRedis(
  ping: () => Promise<unknown>,
  url: string,
  lastError: () => string | null,
  closeAll: () => void,
  options: ReachOptions = {},
): Promise<void> {
  const withinMs = options.withinMs ?? REDIS_REACH_MS;
  const answered = ping();
  // After a give-up its connections are closed and it rejects: nobody waits for it any more.
  answered.catch(() => undefined);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), withinMs);
  });
  const reason = () => `no answer within ${withinMs / 1000} s${lastError() === null ? '' : ` (${lastError()})`}`;
  try {
    if ((await Promise.race([answered, late])) !== 'late') return;
    if (options.keepTrying === undefined) throw new CliError(redisHelp(url, reason()), 2);
    options.keepTrying(`${redisHelp(url, reason())}\n  Still trying: this process starts once Redis answers.`);
    await answered;
  } catch (error) {
    closeAll();
    if (error instanceof CliError) throw error;
    throw new CliError(redisHelp(url, (error as Error).message), 2);
  } finally {
    clearTimeout(timer);
  }
}
