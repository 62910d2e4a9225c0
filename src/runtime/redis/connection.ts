import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { parseRedisTarget } from '../../config/redis-url.ts';

/**
 * Production Redis connections: redaction for logs and ioredis clients with the options sessiond
 * relies on (URLs are parsed by config/redis-url.ts, re-exported here). A password never reaches a
 * log line or an error message.
 */

export {
  DEFAULT_REDIS_PORT,
  MAX_REDIS_DB,
  MAX_SEED_NODES,
  parseRedisTarget,
  parseRedisUrl,
  type ParsedRedisTarget,
  type ParsedRedisUrl,
  type SeedNode,
} from '../../config/redis-url.ts';

/**
 * The URL with its password masked, for logs. Works on anything: an unparseable string has
 * everything between `://` and its last `@` masked (or is replaced entirely when it has no scheme).
 */
export function redactUrl(url: string): string {
  const parsed = parseRedisTarget(url);
  if (parsed.ok) return parsed.display;
  if (typeof url !== 'string') return '<invalid url>';
  const schemeEnd = url.indexOf('://');
  if (schemeEnd === -1) return url.includes('@') || url.includes(':') ? '<invalid url>' : url;
  const at = url.lastIndexOf('@');
  if (at < schemeEnd) return url;
  return `${url.slice(0, schemeEnd + 3)}***${url.slice(at)}`;
}

export type RedisLogger = (line: string) => void;

export interface CreateRedisOptions {
  /** What the connection is for (`api`, `worker`, `events`…): shown as CLIENT SETNAME `sessiond:<role>`. */
  role: string;
  /** Do not connect until the first command (or `connect()`). */
  lazyConnect?: boolean;
  /**
   * How many reconnect attempts a pending command waits through before it fails (default 20: about
   * 30 s of outage with the backoff below). `null` = wait forever: required by BullMQ for blocking
   * connections (see `forBullMQ`).
   */
  maxRetriesPerRequest?: number | null;
  /** Where connection errors go (default: stderr). Lines are rate-limited and never hold the password. */
  log?: RedisLogger;
}

export const DEFAULT_MAX_RETRIES_PER_REQUEST = 20;
export const RECONNECT_BASE_DELAY_MS = 50;
export const RECONNECT_MAX_DELAY_MS = 2000;
/** An identical error is logged at most once per window; the next line says how many were skipped. */
export const ERROR_LOG_WINDOW_MS = 30_000;

/** Delay before reconnect attempt `times` (1, 2, …): exponential from 50 ms, capped at 2 s, ±10 % jitter. */
export function reconnectDelay(times: number, random: () => number = Math.random): number {
  const exponent = Math.min(Math.max(times, 1) - 1, 16);
  const base = Math.min(RECONNECT_MAX_DELAY_MS, RECONNECT_BASE_DELAY_MS * 2 ** exponent);
  return Math.round(base * (0.9 + 0.2 * random()));
}

function defaultLog(line: string): void {
  console.error(line);
}

/** Replaces every occurrence of the secret (raw and percent-encoded) with `***`. */
function scrub(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) {
    if (secret === '') continue;
    out = out.split(secret).join('***');
  }
  return out;
}

/**
 * The one connection factory of sessiond (workers, `serve`, the CLI, the library client): an ioredis
 * client for `url` with sessiond's production options: ready check, reconnect forever with capped
 * backoff, `connectionName: sessiond:<role>`, resend on READONLY (failover), and an `error` listener
 * that never crashes the process and logs each distinct error at most once per 30 s, without the
 * password. Throws (with a message free of secrets) when the URL is invalid.
 *
 * A cluster URL (`redis+cluster://…`) gives an ioredis `Cluster`, typed as `Redis`: it answers the
 * same commands, routed by key slot (a command or script over keys of two slots is refused by
 * Redis, CROSSSLOT). Code that must know asks `isCluster(client)`.
 */
export function createRedis(url: string, options: CreateRedisOptions): Redis {
  const parsed = parseRedisTarget(url);
  if (!parsed.ok) throw new Error(parsed.message);
  if (!/^[A-Za-z0-9._:-]{1,64}$/.test(options.role)) {
    throw new Error(
      `invalid Redis connection role "${options.role.slice(0, 64)}": use letters, digits, '.', '_', ':' or '-'`,
    );
  }
  const name = `sessiond:${options.role}`;
  const password = parsed.options.password ?? '';
  const secrets = password === '' ? [] : [password, encodeURIComponent(password)];
  const log = options.log ?? defaultLog;
  const nodeOptions: RedisOptions = {
    ...parsed.options,
    connectionName: name,
    maxRetriesPerRequest:
      options.maxRetriesPerRequest === undefined ? DEFAULT_MAX_RETRIES_PER_REQUEST : options.maxRetriesPerRequest,
    enableReadyCheck: true,
    connectTimeout: 10_000,
    keepAlive: 30_000,
    reconnectOnError: (err) => (err.message.startsWith('READONLY') ? 2 : false),
  };
  if (parsed.kind === 'cluster') {
    const clusterOptions: ClusterOptions = {
      redisOptions: nodeOptions,
      lazyConnect: options.lazyConnect ?? false,
      enableReadyCheck: true,
      // Reads and writes go to masters: a replica may lag behind what a fenced write just stored.
      scaleReads: 'master',
      clusterRetryStrategy: (times) => reconnectDelay(times),
      // A master killed: its replica is promoted within cluster-node-timeout; commands wait and are redirected.
      retryDelayOnFailover: 200,
      retryDelayOnClusterDown: 200,
      retryDelayOnTryAgain: 100,
      retryDelayOnMoved: 0,
      maxRedirections: 64,
      slotsRefreshTimeout: 2000,
      ...(parsed.options.tls !== undefined
        ? {
            dnsLookup: (address: string, callback: (err: Error | null, address: string) => void) =>
              callback(null, address),
          }
        : {}),
    };
    const cluster = new Cluster(parsed.nodes, clusterOptions);
    attachLogging(cluster, name, parsed.display, secrets, log);
    cluster.on('node error', (err: unknown, node: unknown) =>
      cluster.emit('error', err instanceof Error ? new Error(`node ${String(node)}: ${err.message}`) : err),
    );
    return cluster as unknown as Redis;
  }
  const client = new Redis({
    ...nodeOptions,
    lazyConnect: options.lazyConnect ?? false,
    retryStrategy: (times) => reconnectDelay(times),
  });
  attachLogging(client, name, parsed.display, secrets, log);
  // Each connection (a reconnect makes a new socket) sends the commands of one tick in one syscall.
  client.on('connect', () => coalesceWrites(client.stream));
  endsWhileReconnecting(client);
  return client;
}

/**
 * ioredis 5 (redis/ioredis#1247): `disconnect()` while a client waits to reconnect cancels the retry
 * but, with no socket left to close, never sets `end`; its queued commands wait forever and so does
 * anyone waiting for `end`. BullMQ's `Worker.close()` does (it disconnects its blocking connection
 * and awaits `end`), so a worker told to stop just after Redis came back could hang on SIGTERM. This
 * finishes such a close as ioredis's own close handler would: queued commands fail, the status is
 * `end`. The blocking connections BullMQ makes with `duplicate()` get the same mend.
 */
function endsWhileReconnecting(client: Redis): void {
  const inner = client as unknown as {
    disconnect: (reconnect?: boolean) => void;
    duplicate: (override?: Partial<RedisOptions>) => Redis;
    setStatus: (status: string) => void;
    flushQueue: (error: Error) => void;
  };
  const disconnect = inner.disconnect.bind(client);
  inner.disconnect = (reconnect = false) => {
    const waiting = !reconnect && client.status === 'reconnecting';
    disconnect(reconnect);
    if (!waiting || client.status !== 'reconnecting') return;
    inner.setStatus('end');
    inner.flushQueue(new Error('Connection is closed.'));
  };
  const duplicate = inner.duplicate.bind(client);
  inner.duplicate = (override) => {
    const copy = duplicate(override);
    endsWhileReconnecting(copy);
    return copy;
  };
}

/** True for a client made from a cluster URL (an ioredis Cluster). */
export function isCluster(client: Redis): boolean {
  return (client as unknown as { isCluster?: boolean }).isCluster === true;
}

function attachLogging(
  client: Redis | Cluster,
  name: string,
  display: string,
  secrets: readonly string[],
  log: RedisLogger,
): void {
  let lastMessage = '';
  let lastLoggedAt = 0;
  let suppressed = 0;
  let failing = false;
  client.on('error', (err: unknown) => {
    try {
      const raw =
        err instanceof Error ? `${(err as NodeJS.ErrnoException).code ?? err.name}: ${err.message}` : String(err);
      const message = scrub(raw, secrets);
      const now = Date.now();
      failing = true;
      if (message === lastMessage && now - lastLoggedAt < ERROR_LOG_WINDOW_MS) {
        suppressed += 1;
        return;
      }
      const skipped = suppressed > 0 ? ` (${suppressed} similar errors not shown)` : '';
      lastMessage = message;
      lastLoggedAt = now;
      suppressed = 0;
      log(`[${name}] redis ${display}: ${message}${skipped}`);
    } catch {
      // A logger that throws must not turn a connection error into a crash.
    }
  });
  client.on('ready', () => {
    if (!failing) return;
    failing = false;
    const skipped = suppressed > 0 ? ` (${suppressed} similar errors not shown)` : '';
    lastMessage = '';
    suppressed = 0;
    try {
      log(`[${name}] redis ${display}: connected again${skipped}`);
    } catch {
      // ignore
    }
  });
}

/**
 * ioredis writes every command to its socket at once: one write(2) per command, which costs more
 * CPU than the command itself on a busy worker (10–15 µs each here, see BENCHMARKS.md). This corks
 * the socket at the first write of a tick and uncorks it on the next tick, so the commands issued
 * meanwhile (by all the sessions a worker drives) leave in one writev(2). Order is unchanged and
 * nothing waits longer than the current tick.
 */
function coalesceWrites(stream: { cork(): void; uncork(): void; write(...args: never[]): boolean }): void {
  if ((stream as { sessiondCoalesced?: boolean }).sessiondCoalesced === true) return;
  (stream as { sessiondCoalesced?: boolean }).sessiondCoalesced = true;
  const write = (stream.write as (...args: unknown[]) => boolean).bind(stream);
  let corked = false;
  const uncork = (): void => {
    corked = false;
    stream.uncork();
  };
  (stream as { write: unknown }).write = (...args: unknown[]): boolean => {
    if (!corked) {
      corked = true;
      stream.cork();
      process.nextTick(uncork);
    }
    return write(...args);
  };
}

/**
 * A client for BullMQ (Queue, Worker, QueueEvents): `maxRetriesPerRequest: null`, which BullMQ
 * requires for its blocking commands, so that a command waits through an outage instead of failing.
 */
export function forBullMQ(url: string, options: Omit<CreateRedisOptions, 'maxRetriesPerRequest'>): Redis {
  return createRedis(url, { ...options, maxRetriesPerRequest: null });
}
