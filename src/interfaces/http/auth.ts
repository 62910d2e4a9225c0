import { createHash, timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';
import type { MiddlewareHandler } from 'hono';

/** 127.0.0.0/8, ::1 and `localhost`: only this machine can connect. */
export function isLoopbackHost(host: string): boolean {
  const h = host.trim().toLowerCase().replace(/^\[|\]$/g, '');
  if (h === 'localhost' || h === '::1' || h === '::ffff:127.0.0.1') return true;
  return isIP(h) === 4 && h.startsWith('127.');
}

/** Compares two secrets in constant time (hashing first, so their lengths leak nothing either). */
export function tokensEqual(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given, 'utf8').digest();
  const b = createHash('sha256').update(expected, 'utf8').digest();
  return timingSafeEqual(a, b);
}

const MUTATING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export interface GuardOptions {
  /** The host the server is bound to. */
  host: string;
  /** When set, every mutating request must carry `Authorization: Bearer <token>`. */
  token: string | undefined;
}

/**
 * Request guards, in order:
 * - bound to loopback: the `Host` header must name this machine (a web page that
 *   re-binds its DNS name to 127.0.0.1 is refused: 421);
 * - a mutating request whose `Origin` is another site is refused (403): a page
 *   of that site cannot drive sessiond from the user's browser;
 * - with a token configured, a mutating request without the right bearer token
 *   is refused (401). Reads (GET) stay open.
 */
export function guard(options: GuardOptions): MiddlewareHandler {
  const loopback = isLoopbackHost(options.host);
  return async (c, next) => {
    const hostHeader = c.req.header('host');
    if (loopback && hostHeader !== undefined && !isLoopbackHost(hostName(hostHeader))) {
      return c.json({ error: `this server is bound to ${options.host} and answers only requests for this machine (Host: localhost or 127.0.0.1)` }, 421);
    }
    if (MUTATING.has(c.req.method)) {
      const origin = c.req.header('origin');
      if (origin !== undefined && origin !== 'null' && hostHeader !== undefined && originHost(origin) !== hostHeader.toLowerCase()) {
        return c.json({ error: 'cross-origin requests may not change anything' }, 403);
      }
      if (origin === 'null') return c.json({ error: 'cross-origin requests may not change anything' }, 403);
      if (options.token !== undefined) {
        const header = c.req.header('authorization') ?? '';
        const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
        if (match === null || !tokensEqual(match[1] ?? '', options.token)) {
          c.header('WWW-Authenticate', 'Bearer realm="sessiond"');
          return c.json({ error: match === null ? 'this endpoint needs Authorization: Bearer <token> (SESSIOND_API_TOKEN)' : 'invalid token' }, 401);
        }
      }
    }
    await next();
  };
}

/** `host:port` → `host`, `[::1]:80` → `::1`. */
function hostName(hostHeader: string): string {
  const h = hostHeader.trim();
  if (h.startsWith('[')) return h.slice(1, h.indexOf(']'));
  const colon = h.lastIndexOf(':');
  return colon > 0 && h.indexOf(':') === colon ? h.slice(0, colon) : h;
}

function originHost(origin: string): string | null {
  try {
    return new URL(origin).host.toLowerCase();
  } catch {
    return null;
  }
}
