import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Context, MiddlewareHandler } from 'hono';
import { getCookie } from 'hono/cookie';
import type { Config } from '../../../config/config.ts';
import type { CallerIdentity, Scope } from '../../../config/tokens.ts';
import type { Logger } from '../../log.ts';
import { writeAudit } from './audit.ts';
import {
  lowerScope,
  scopeAllows,
  Signer,
  TokenSet,
  type HeldToken,
  type Principal,
  type SignedClaims,
} from './credentials.ts';
import { HostPolicy, isLoopbackHost } from './hosts.ts';
import { LoginLimiter } from './login-limiter.ts';
import {
  matchRoute,
  routeTable,
  type RouteMatch,
  type RouteRule,
  type RouteScope,
  type ScopedRoute,
} from './route-scopes.ts';

declare module 'hono' {
  interface ContextVariableMap {
    /** Set by the guard: who this request is (absent on a public route without a valid credential). */
    principal?: Principal;
  }
}

const MUTATING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
export const LOGIN_COOKIE = 'sessiond_login';
/** Logged-out cookies remembered per server. */
export const MAX_REVOKED = 10_000;
/** The operation a stream ticket opens (and nothing else). */
export const STREAM_OPERATION = 'streamEvents';
/** Bull Board (its own UI and API, outside the OpenAPI document): GET needs read, anything else admin. */
export const BULL_BOARD_PATH = '/queues';
/** Bull Board with its actions (retry, clean, pause…): admin only. */
export const BULL_BOARD_ADMIN_PATH = '/queues-admin';

export interface AuthOptions {
  http: Config['http'];
  /** The local caller (config `caller`): who a request is with no token configured, and SESSIOND_API_TOKEN's tenant and priority. */
  caller: CallerIdentity;
  logger: Logger;
  /** The declared routes (routes/index.ts `ALL_ROUTES`): each one's scope is the route table. */
  routes: readonly ScopedRoute[];
}

type Authenticated = { principal: Principal } | { error: string } | null;

/**
 * Who may read and who may act. Every request, in order:
 * 1. `Host` must be one this server answers to (421 otherwise: DNS rebinding);
 * 2. a mutation's `Origin` must be allowed (403);
 * 3. the credential — `?ticket=` (the event stream only), `Authorization: Bearer`,
 *    or the dashboard's login cookie — must be valid (401) and grant the route's
 *    scope (403). With no token configured (loopback only) every route is open.
 * Every mutating and every refused request leaves one audit line.
 */
export class Auth {
  readonly tokens: TokenSet;
  readonly signer: Signer;
  readonly hosts: HostPolicy;
  readonly routes: RouteRule[];
  /** A token is configured: reads need one too (only `public` routes stay open). */
  readonly required: boolean;
  readonly #http: Config['http'];
  readonly #logger: Logger;
  /** Logged-out cookies → their expiry. */
  readonly #revoked = new Map<string, number>();
  /** Failed logins per client address (429 with Retry-After past the burst). */
  readonly logins = new LoginLimiter();
  readonly #caller: CallerIdentity;
  /** Each configured token's fingerprint (an HMAC under the signer's key), computed once, not per request. */
  readonly #fingerprints = new WeakMap<HeldToken, string>();

  constructor(options: AuthOptions) {
    this.#http = options.http;
    this.#logger = options.logger;
    this.#caller = options.caller;
    this.tokens = TokenSet.fromConfig(options.http, options.caller);
    this.signer = new Signer(options.http.secret);
    this.hosts = new HostPolicy({
      bound: options.http.host,
      allowedHosts: options.http.allowedHosts,
      allowedOrigins: options.http.allowedOrigins,
    });
    this.routes = routeTable(options.routes);
    this.required = this.tokens.size > 0;
    if (!isLoopbackHost(options.http.host) && !this.required) {
      throw new Error(
        `refusing to serve on ${options.http.host} without an API token: set SESSIOND_API_TOKEN (at least 16 characters), http.tokens / SESSIOND_API_TOKENS_FILE, or bind to 127.0.0.1`,
      );
    }
  }

  /** The principal the guard admitted this request as (null on a public route without a valid credential). */
  principalOf(c: Context): Principal | null {
    return c.get('principal') ?? null;
  }

  /**
   * A stream ticket for `sessionId`: the principal's scope, bound to its token's fingerprint, until the
   * sooner of the TTL and its own expiry.
   */
  issueTicket(principal: Principal, sessionId: string, now = Date.now()): { ticket: string; expiresAt: number } {
    const exp = Math.min(now + this.#http.streamTicketTtl, principal.expiresAt ?? Number.POSITIVE_INFINITY);
    const held = principal.name === null ? null : this.tokens.entry(principal.name);
    const f = held === null ? {} : { f: this.#fingerprint(held) };
    return {
      ticket: this.signer.sign({ p: 'stream', n: principal.name, sc: principal.scope, ...f, exp, s: sessionId }),
      expiresAt: exp,
    };
  }

  /**
   * Logout: this server refuses the cookie from now on (until it would have expired anyway), so a
   * copy of it is no longer good here. Held in memory, at most MAX_REVOKED (the oldest go first).
   */
  revoke(cookie: string | undefined, now = Date.now()): void {
    if (cookie === undefined || cookie === '') return;
    const checked = this.signer.verify(cookie, 'login', now);
    if (!checked.ok) return;
    for (const [value, exp] of this.#revoked) if (exp <= now) this.#revoked.delete(value);
    this.#revoked.set(cookie, checked.claims.exp);
    while (this.#revoked.size > MAX_REVOKED) this.#revoked.delete(this.#revoked.keys().next().value as string);
  }

  /** A login cookie's value for a valid token (bound to its fingerprint), or null. */
  login(token: string, now = Date.now()): { value: string; principal: Principal; maxAgeS: number } | null {
    const found = this.tokens.verify(token);
    if (found === null) return null;
    const exp = now + this.#http.loginTtl;
    return {
      value: this.signer.sign({
        p: 'login',
        n: found.name,
        sc: found.scope,
        f: this.#fingerprint(found),
        exp,
      }),
      principal: { ...principalOf(found, 'cookie'), expiresAt: exp },
      maxAgeS: Math.floor(this.#http.loginTtl / 1000),
    };
  }

  /** The local caller's principal (no token configured, loopback only). */
  get open(): Principal {
    return {
      name: null,
      scope: 'admin',
      via: 'open',
      tenant: this.#caller.tenant,
      maxPriority: this.#caller.maxPriority,
    };
  }

  /** The caps of the principal's token (null: no token configured, nothing capped per token). */
  capsOf(principal: Principal | null): { maxSessions: number; maxStreams: number } | null {
    const held = principal?.name == null ? null : this.tokens.entry(principal.name);
    return held === null ? null : { maxSessions: held.maxSessions, maxStreams: held.maxStreams };
  }

  middleware(): MiddlewareHandler {
    return async (c, next) => {
      const method = c.req.method;
      const path = c.req.path;
      const match = matchRoute(this.routes, method, path);
      const mutating = MUTATING.has(method);
      const route =
        match?.rule.path ??
        (isBullBoard(path)
          ? `${under(path, BULL_BOARD_ADMIN_PATH) ? BULL_BOARD_ADMIN_PATH : BULL_BOARD_PATH}/*`
          : path);
      const sessionId = match?.params.id ?? null;
      const client = clientAddress(c);
      let principal: Principal | null = null;
      const refuse = (status: 401 | 403 | 421, reason: string, message: string): Response => {
        if (status === 401) c.header('WWW-Authenticate', 'Bearer realm="sessiond"');
        writeAudit(this.#logger, { method, route, sessionId, status, principal, reason, client });
        return c.json({ error: message }, status);
      };

      const host = c.req.header('host');
      if (!this.hosts.hostAllowed(host)) {
        return refuse(
          421,
          'host',
          `this server answers only requests for ${this.hosts.describe()}; add this host to http.allowedHosts (SESSIOND_ALLOWED_HOSTS) if it is yours`,
        );
      }
      const origin = c.req.header('origin');
      if (mutating && !this.hosts.originAllowed(origin, host)) {
        return refuse(
          403,
          'origin',
          'cross-origin requests may not change anything; add the origin to http.allowedOrigins (SESSIOND_ALLOWED_ORIGINS) if it is yours',
        );
      }

      const need = requiredScope(match, method, path);
      const shown = this.#authenticate(c, match);
      if (!this.required) {
        principal = this.open;
      } else {
        if (shown !== null && 'principal' in shown) principal = shown.principal;
        if (need !== 'public') {
          if (shown !== null && 'error' in shown) return refuse(401, shown.error, shown.error);
          if (principal === null)
            return refuse(
              401,
              'no credential',
              'this endpoint needs a token: Authorization: Bearer <token>, the dashboard login, or a stream ticket',
            );
          if (!scopeAllows(principal.scope, need)) {
            return refuse(
              403,
              'scope',
              `the token "${principal.name ?? ''}" has scope ${principal.scope}; ${method} ${route} needs ${need}`,
            );
          }
          // The login cookie is sent by the browser itself: a mutation it authorises must come from a page (Origin) this server allows.
          if (mutating && principal.via === 'cookie' && origin === undefined)
            return refuse(403, 'origin', 'a mutation authorised by the login cookie must carry an Origin header');
        }
      }
      if (principal !== null) c.set('principal', principal);
      await next();
      const status = c.res.status;
      if (mutating || status === 401 || status === 403 || status === 421)
        writeAudit(this.#logger, { method, route, sessionId, status, principal, client });
    };
  }

  #authenticate(c: Context, match: RouteMatch | null): Authenticated {
    const ticket = c.req.query('ticket');
    if (ticket !== undefined) {
      if (match?.rule.operationId !== STREAM_OPERATION) return { error: 'a stream ticket opens only the event stream' };
      const checked = this.signer.verify(ticket, 'stream');
      if (!checked.ok)
        return {
          error: checked.reason === 'expired' ? 'stream ticket expired: get a new one' : 'invalid stream ticket',
        };
      if (checked.claims.s !== match.params.id) return { error: 'this stream ticket is for another session' };
      return this.#still(checked.claims, 'ticket');
    }
    const header = c.req.header('authorization');
    if (header !== undefined) {
      const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
      if (m === null) return { error: 'Authorization must be "Bearer <token>"' };
      const found = this.tokens.verify(m[1] ?? '');
      return found === null ? { error: 'invalid token' } : { principal: principalOf(found, 'bearer') };
    }
    const cookie = getCookie(c, LOGIN_COOKIE);
    if (cookie !== undefined && cookie !== '') {
      const checked = this.signer.verify(cookie, 'login');
      if (!checked.ok)
        return { error: checked.reason === 'expired' ? 'login expired: log in again' : 'invalid login cookie' };
      if (this.#revoked.has(cookie)) return { error: 'logged out: log in again' };
      return this.#still(checked.claims, 'cookie');
    }
    return null;
  }

  /**
   * A signed credential holds as long as the very token it was issued from is still configured under
   * its name (its fingerprint matches: not rotated, not removed), with the lower of the two scopes.
   */
  #still(claims: SignedClaims, via: 'ticket' | 'cookie'): Authenticated {
    const now = claims.n === null ? null : this.tokens.entry(claims.n);
    if (now === null) return { error: 'the token behind this credential is no longer configured' };
    const fingerprint = Buffer.from(this.#fingerprint(now));
    const claimed = Buffer.from(typeof claims.f === 'string' ? claims.f : '');
    if (claimed.length !== fingerprint.length || !timingSafeEqual(claimed, fingerprint))
      return { error: 'the token behind this credential was replaced: log in again' };
    return { principal: { ...principalOf(now, via), scope: lowerScope(claims.sc, now.scope), expiresAt: claims.exp } };
  }

  #fingerprint(token: HeldToken): string {
    let f = this.#fingerprints.get(token);
    if (f === undefined) {
      f = this.signer.fingerprint(token.hash);
      this.#fingerprints.set(token, f);
    }
    return f;
  }
}

function principalOf(token: HeldToken, via: Principal['via']): Principal {
  return { name: token.name, scope: token.scope, via, tenant: token.tenant, maxPriority: token.maxPriority };
}

function under(path: string, base: string): boolean {
  return path === base || path.startsWith(`${base}/`);
}

function isBullBoard(path: string): boolean {
  return under(path, BULL_BOARD_PATH) || under(path, BULL_BOARD_ADMIN_PATH);
}

/** The route's declared scope; Bull Board's admin mount: admin; any other unknown route (Bull Board's read-only one included): read for GET, admin otherwise. */
export function requiredScope(match: RouteMatch | null, method: string, path: string): RouteScope {
  if (match !== null) return match.rule.scope;
  const read = method === 'GET' || method === 'HEAD';
  if (under(path, BULL_BOARD_ADMIN_PATH)) return 'admin';
  return read ? 'read' : 'admin';
}

/** The address of the client's connection (null in-process, e.g. `app.request`). */
export function clientAddress(c: Context): string | null {
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  return incoming?.socket?.remoteAddress ?? null;
}

export type { Principal, Scope };
