import net from 'node:net';
import type { RedisOptions } from 'ioredis';

/**
 * Redis URLs as the configuration names them: parsing and validation of a single server's URL and
 * of a Redis Cluster's seed nodes. Pure (no connection); runtime/redis/connection.ts makes the clients.
 * A password never reaches an error message.
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
    return fail(
      `unsupported scheme "${scheme}://" (use redis:// or rediss:// for TLS, redis+cluster:// or rediss+cluster:// for a Redis Cluster)`,
    );

  // The authority ends at the first '/', '?' or '#'. An '@' after that means the credentials hold
  // one of those characters unencoded: the URL would split in the middle of the password.
  const afterScheme = input.slice(schemeMatch[0].length);
  const authorityEnd = afterScheme.search(/[/?#]/);
  const authority = authorityEnd === -1 ? afterScheme : afterScheme.slice(0, authorityEnd);
  const rest = authorityEnd === -1 ? '' : afterScheme.slice(authorityEnd);
  if (rest.includes('@')) {
    return fail(
      'the user name or password contains a reserved character (/ ? # @): percent-encode it (encodeURIComponent)',
    );
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
    if (!(port >= 1 && port <= 65535))
      return fail(`port must be an integer from 1 to 65535 (got "${portText.slice(0, 12)}")`);
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
  const credentials =
    username !== '' || password !== '' ? `${encodeURIComponent(username)}${password !== '' ? ':***' : ''}@` : '';
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
    return {
      ok: false,
      message:
        'invalid Redis URL: a cluster URL takes no database, query or fragment (a Redis Cluster has only database 0)',
    };
  }
  const at = authority.lastIndexOf('@');
  const credentials = at === -1 ? '' : authority.slice(0, at + 1);
  const hosts = (at === -1 ? authority : authority.slice(at + 1)).split(',');
  if (hosts.length > MAX_SEED_NODES)
    return { ok: false, message: `invalid Redis URL: at most ${MAX_SEED_NODES} seed nodes` };
  const nodes: SeedNode[] = [];
  let options: RedisOptions | null = null;
  let display = '';
  for (const [i, host] of hosts.entries()) {
    if (host.trim() === '')
      return {
        ok: false,
        message: `invalid Redis URL: seed node ${i + 1} is empty (expected ${scheme}+cluster://host:port,host:port…)`,
      };
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
