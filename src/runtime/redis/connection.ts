import net from 'node:net';
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';

/**
 * Production Redis connections: URL parsing and validation, redaction for logs, and ioredis clients
 * with the options sessiond relies on. A password never reaches a log line or an error message.
 */

export const DEFAULT_REDIS_PORT = 6379;
/** Largest logical database index accepted in a URL (Redis' `databases` is 16 by default). */
export const MAX_REDIS_DB = 2_147_483_647;

export type ParsedRedisUrl = { ok: true; options: RedisOptions; display: string } | { ok: false; message: string };

const FORMAT = 'expected redis://[user:password@]host[:port][/db] or rediss://… for TLS';

function fail(message: string): ParsedRedisUrl {
  return { ok: false, message: `invalid Redis URL: ${message}` };
}

/**
 * Parses `redis://[user:pass@]host[:port][/db]` and `rediss://…` (TLS) into ioredis options.
 * `display` is the URL with the password replaced by `***`. Error messages never quote the
 * credentials part of the input.
 */
export function parseRedisUrl(url: string): ParsedRedisUrl {
  if (typeof url !== 'string' || url.trim() === '') return fail(`empty (${FORMAT})`);
  const input = url.trim();
  const schemeMatch = /^([A-Za-z][A-Za-z0-9+.-]{0,15}):\/\//.exec(input);
  if (schemeMatch === null) return fail(`missing scheme: ${FORMAT}`);
  const scheme = (schemeMatch[1] ?? '').toLowerCase();
  if (scheme !== 'redis' && scheme !== 'rediss')
    return fail(`unsupported scheme "${scheme}://" (use redis:// or rediss:// for TLS, redis+cluster:// or rediss+cluster:// for a Redis Cluster)`);

  // The authority ends at the first '/', '?' or '#'. An '@' after that means the credentials hold
  // one of those characters unencoded: the URL would split in the middle of the password.
  const afterScheme = input.slice(schemeMatch[0].length);
  const authorityEnd = afterScheme.search(/[/?#]/);
  const authority = authorityEnd === -1 ? afterScheme : afterScheme.slice(0, authorityEnd);
  const rest = authorityEnd === -1 ? '' : afterScheme.slice(authorityEnd);
  if (rest.includes('@')) {
    return fail('the user name or password contains a reserved character (/ ? # @): percent-encode it (encodeURIComponent)');
  }
  const hostPort = authority.slice(authority.lastIndexOf('@') + 1);
  let portText: string | undefined;
  if (hostPort.startsWith('[')) {
    const close = hostPort.indexOf(']');
    if (close === -1) return fail('unterminated IPv6 address (expected [addr]:port)');
    const tail = hostPort.slice(close + 1);
    if (tail !== '' && !tail.startsWith(':')) return fail('unexpected characters after the IPv6 address');
    portText = tail === '' ? undefined : tail.slice(1);
  } else {
    const colon = hostPort.lastIndexOf(':');
    portText = colon === -1 ? undefined : hostPort.slice(colon + 1);
  }
  const hostText = portText === undefined ? hostPort : hostPort.slice(0, hostPort.length - portText.length - 1);
  if (hostText === '' || hostText === '[]') return fail(`missing host (${FORMAT})`);
  if (portText !== undefined && portText !== '') {
    const port = /^\d{1,5}$/.test(portText) ? Number(portText) : NaN;
    if (!(port >= 1 && port <= 65535)) return fail(`port must be an integer from 1 to 65535 (got "${portText.slice(0, 12)}")`);
  }

  let parsed: URL;
  try {
    parsed = new URL(input);
  } catch {
    // The error says what is wrong with the URL.
    return fail('not a valid URL (check the host, and percent-encode special characters of the password)');
  }
  const rawHost = parsed.hostname;
  if (rawHost === '') return fail(`missing host (${FORMAT})`);
  const ipv6 = rawHost.startsWith('[') && rawHost.endsWith(']');
  const host = ipv6 ? rawHost.slice(1, -1) : rawHost;
  const port = parsed.port === '' ? DEFAULT_REDIS_PORT : Number(parsed.port);

  let username: string;
  let password: string;
  try {
    username = decodeURIComponent(parsed.username);
    password = decodeURIComponent(parsed.password);
  } catch {
    // The error says what is wrong with the URL.
    return fail('the user name or password has an invalid percent-encoding');
  }

  let db = 0;
  if (parsed.pathname !== '' && parsed.pathname !== '/') {
    const dbMatch = /^\/(\d{1,10})\/?$/.exec(parsed.pathname);
    const value = dbMatch === null ? NaN : Number(dbMatch[1]);
    if (!(Number.isInteger(value) && value >= 0 && value <= MAX_REDIS_DB)) {
      return fail(`the path must be a database number like /0 (got "${parsed.pathname.slice(0, 24)}")`);
    }
    db = value;
  }
  if (parsed.search !== '' || parsed.hash !== '') {
    return fail('query parameters and fragments are not supported (only redis://[user:password@]host[:port][/db])');
  }

  const options: RedisOptions = { host, port, db };
  if (username !== '') options.username = username;
  if (password !== '') options.password = password;
  if (scheme === 'rediss') {
    // SNI takes a host name, never an IP address (RFC 6066).
    options.tls = net.isIP(host) === 0 ? { servername: host } : {};
  }
  const credentials = username !== '' || password !== '' ? `${encodeURIComponent(username)}${password !== '' ? ':***' : ''}@` : '';
  const display = `${scheme}://${credentials}${ipv6 ? `[${host}]` : host}:${port}/${db}`;
  return { ok: true, options, display };
}

/**
 * `REDIS_URL` names either one Redis (`redis://`, `rediss://`) or a Redis Cluster by its seed
 * nodes: `redis+cluster://[user:password@]host:port[,host:port…]` (`rediss+cluster://` for TLS).
 * Every seed node is checked like a single URL; a cluster has only database 0.
 */

export interface SeedNode {
  host: string;
  port: number;
}

export type ParsedRedisTarget =
  | { ok: true; kind: 'single'; options: RedisOptions; display: string }
  | { ok: true; kind: 'cluster'; nodes: SeedNode[]; options: RedisOptions; display: string }
  | { ok: false; message: string };

/** Seed nodes accepted in one URL (a few are enough: the client learns the rest from CLUSTER SLOTS). */
export const MAX_SEED_NODES = 64;

const CLUSTER_SCHEME = /^(rediss?)\+cluster:\/\//i;

/** Parses a single or a cluster URL; `display` masks the password. Messages never quote credentials. */
export function parseRedisTarget(url: string): ParsedRedisTarget {
  const input = typeof url === 'string' ? url.trim() : '';
  const match = CLUSTER_SCHEME.exec(input);
  if (match === null) {
    const single = parseRedisUrl(url);
    return single.ok ? { ok: true, kind: 'single', options: single.options, display: single.display } : single;
  }
  const scheme = (match[1] ?? 'redis').toLowerCase();
  const rest = input.slice(match[0].length);
  const pathStart = rest.search(/[/?#]/);
  const authority = pathStart === -1 ? rest : rest.slice(0, pathStart);
  const tail = pathStart === -1 ? '' : rest.slice(pathStart);
  if (tail !== '' && tail !== '/' && tail !== '/0') {
    return { ok: false, message: 'invalid Redis URL: a cluster URL takes no database, query or fragment (a Redis Cluster has only database 0)' };
  }
  const at = authority.lastIndexOf('@');
  const credentials = at === -1 ? '' : authority.slice(0, at + 1);
  const hosts = (at === -1 ? authority : authority.slice(at + 1)).split(',');
  if (hosts.length > MAX_SEED_NODES) return { ok: false, message: `invalid Redis URL: at most ${MAX_SEED_NODES} seed nodes` };
  const nodes: SeedNode[] = [];
  let options: RedisOptions | null = null;
  let display = '';
  for (const [i, host] of hosts.entries()) {
    if (host.trim() === '') return { ok: false, message: `invalid Redis URL: seed node ${i + 1} is empty (expected ${scheme}+cluster://host:port,host:port…)` };
    const parsed = parseRedisUrl(`${scheme}://${credentials}${host}`);
    if (!parsed.ok) return { ok: false, message: `${parsed.message} (seed node ${i + 1})` };
    nodes.push({ host: parsed.options.host ?? '', port: parsed.options.port ?? 6379 });
    if (options === null) {
      options = parsed.options;
      const prefix = parsed.display.slice(0, parsed.display.indexOf('://') + 3);
      const afterScheme = parsed.display.slice(prefix.length);
      display = `${scheme}+cluster://${afterScheme.slice(0, afterScheme.lastIndexOf('@') + 1)}`;
    }
  }
  const shown = nodes.map((n) => (n.host.includes(':') ? `[${n.host}]:${n.port}` : `${n.host}:${n.port}`)).join(',');
  const { host: _host, port: _port, db: _db, ...shared } = options ?? {};
  return { ok: true, kind: 'cluster', nodes, options: shared, display: `${display}${shown}` };
}

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
    throw new Error(`invalid Redis connection role "${options.role.slice(0, 64)}": use letters, digits, '.', '_', ':' or '-'`);
  }
  const name = `sessiond:${options.role}`;
  const password = parsed.options.password ?? '';
  const secrets = password === '' ? [] : [password, encodeURIComponent(password)];
  const log = options.log ?? defaultLog;
  const nodeOptions: RedisOptions = {
    ...parsed.options,
    connectionName: name,
    maxRetriesPerRequest: options.maxRetriesPerRequest === undefined ? DEFAULT_MAX_RETRIES_PER_REQUEST : options.maxRetriesPerRequest,
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
      ...(parsed.options.tls !== undefined ? { dnsLookup: (address: string, callback: (err: Error | null, address: string) => void) => callback(null, address) } : {}),
    };
    const cluster = new Cluster(parsed.nodes, clusterOptions);
    attachLogging(cluster, name, parsed.display, secrets, log);
    cluster.on('node error', (err: unknown, node: unknown) => cluster.emit('error', err instanceof Error ? new Error(`node ${String(node)}: ${err.message}`) : err));
    return cluster as unknown as Redis;
  }
  const client = new Redis({ ...nodeOptions, lazyConnect: options.lazyConnect ?? false, retryStrategy: (times) => reconnectDelay(times) });
  attachLogging(client, name, parsed.display, secrets, log);
  // Each connection (a reconnect makes a new socket) sends the commands of one tick in one syscall.
  client.on('connect', () => coalesceWrites(client.stream));
  return client;
}

/** True for a client made from a cluster URL (an ioredis Cluster). */
export function isCluster(client: Redis): boolean {
  return (client as unknown as { isCluster?: boolean }).isCluster === true;
}

function attachLogging(client: Redis | Cluster, name: string, display: string, secrets: readonly string[], log: RedisLogger): void {
  let lastMessage = '';
  let lastLoggedAt = 0;
  let suppressed = 0;
  let failing = false;
  client.on('error', (err: unknown) => {
    try {
      const raw = err instanceof Error ? `${(err as NodeJS.ErrnoException).code ?? err.name}: ${err.message}` : String(err);
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
