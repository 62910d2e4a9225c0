import type { Hono } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { readJson, validate, HttpError } from '../body.ts';
import { LoginBody } from '../schemas.ts';
import { clientAddress, LOGIN_COOKIE, type Auth } from './guard.ts';

export interface AuthRoutesOptions {
  /** Mark the cookie Secure: the server speaks HTTPS (or sits behind an HTTPS proxy). */
  secure: boolean;
  /** Checks that the session exists (404 otherwise) before a ticket is issued. */
  sessionExists: (id: string) => Promise<boolean>;
}

/** `POST /api/login`, `POST /api/logout`, `GET /api/whoami`, `POST /api/sessions/:id/stream-ticket`. */
export function registerAuthRoutes(app: Hono, auth: Auth, options: AuthRoutesOptions): void {
  app.post('/api/login', async (c) => {
    const body = validate(LoginBody, await readJson(c));
    if (!auth.required) return c.json(auth.open);
    // Refused before the token is looked at: past the limit, trying the right one teaches nothing either.
    const client = clientAddress(c);
    const allowed = auth.logins.check(client);
    if (!allowed.ok) {
      c.header('Retry-After', String(allowed.retryAfterS));
      return c.json({ error: `too many failed logins from this address: try again in ${allowed.retryAfterS} s` }, 429);
    }
    const login = auth.login(body.token);
    if (login === null) {
      auth.logins.failed(client);
      c.header('WWW-Authenticate', 'Bearer realm="sessiond"');
      return c.json({ error: 'invalid token' }, 401);
    }
    const secure = options.secure || new URL(c.req.url).protocol === 'https:' || c.req.header('x-forwarded-proto') === 'https';
    setCookie(c, LOGIN_COOKIE, login.value, { path: '/', httpOnly: true, sameSite: 'Strict', secure, maxAge: login.maxAgeS });
    return c.json(login.principal);
  });
  app.post('/api/logout', (c) => {
    auth.revoke(getCookie(c, LOGIN_COOKIE));
    deleteCookie(c, LOGIN_COOKIE, { path: '/', httpOnly: true, sameSite: 'Strict' });
    return c.body(null, 204);
  });
  app.get('/api/whoami', (c) => c.json(auth.principalOf(c)));
  app.post('/api/sessions/:id/stream-ticket', async (c) => {
    const id = c.req.param('id');
    const principal = auth.principalOf(c);
    if (principal === null) throw new HttpError(401, 'no credential');
    if (!(await options.sessionExists(id))) throw new HttpError(404, `unknown session "${id}"`);
    const { ticket, expiresAt } = auth.issueTicket(principal, id);
    return c.json({ ticket, expiresAt, url: `/api/sessions/${encodeURIComponent(id)}/events?ticket=${encodeURIComponent(ticket)}` });
  });
}
