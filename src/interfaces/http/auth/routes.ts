import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { z } from 'zod';
import { HttpError } from '../body.ts';
import { error, invalid, json, MUTATING_ERRORS, ref } from '../route.ts';
import { defineRoute } from '../routes/context.ts';
import { sessionOr404 } from '../routes/views.ts';
import { clientAddress, LOGIN_COOKIE } from './guard.ts';

/** `POST /api/login`. */
export const LoginBody = z.strictObject({
  token: z.string().min(1, 'must not be empty').max(4096, 'must be at most 4096 characters'),
});

/** `POST /api/login`, `POST /api/logout`, `GET /api/whoami`, `POST /api/sessions/:id/stream-ticket`. */
export const authRoutes = [
  defineRoute({
    method: 'post',
    path: '/api/login',
    operationId: 'login',
    tags: ['auth'],
    summary: 'Exchange a token for the dashboard login cookie (HttpOnly, SameSite=Strict, Secure over HTTPS)',
    scope: 'public',
    body: {
      schema: LoginBody,
      examples: { token: { summary: 'a configured token', value: { token: 'the-token-you-were-given' } } },
    },
    responses: {
      '200': json(ref('Principal'), 'logged in; `Set-Cookie: sessiond_login=…`'),
      '400': invalid(),
      '429': error('too many failed logins from this client address; `Retry-After` says when to try again'),
      ...MUTATING_ERRORS,
    },
    handler(c, { body }, { auth, secureCookies }) {
      if (!auth.required) return c.json(auth.open);
      // Refused before the token is looked at: past the limit, trying the right one teaches nothing either.
      const client = clientAddress(c);
      const allowed = auth.logins.check(client);
      if (!allowed.ok) {
        c.header('Retry-After', String(allowed.retryAfterS));
        return c.json(
          { error: `too many failed logins from this address: try again in ${allowed.retryAfterS} s` },
          429,
        );
      }
      const login = auth.login(body.token);
      if (login === null) {
        auth.logins.failed(client);
        c.header('WWW-Authenticate', 'Bearer realm="sessiond"');
        return c.json({ error: 'invalid token' }, 401);
      }
      const secure =
        secureCookies || new URL(c.req.url).protocol === 'https:' || c.req.header('x-forwarded-proto') === 'https';
      setCookie(c, LOGIN_COOKIE, login.value, {
        path: '/',
        httpOnly: true,
        sameSite: 'Strict',
        secure,
        maxAge: login.maxAgeS,
      });
      return c.json(login.principal);
    },
  }),
  defineRoute({
    method: 'post',
    path: '/api/logout',
    operationId: 'logout',
    tags: ['auth'],
    summary: 'Clear the login cookie',
    scope: 'public',
    responses: { '204': { description: 'logged out (`Set-Cookie` clears it)' }, ...MUTATING_ERRORS },
    handler(c, _input, { auth }) {
      auth.revoke(getCookie(c, LOGIN_COOKIE));
      deleteCookie(c, LOGIN_COOKIE, { path: '/', httpOnly: true, sameSite: 'Strict' });
      return c.body(null, 204);
    },
  }),
  defineRoute({
    method: 'get',
    path: '/api/whoami',
    operationId: 'whoami',
    tags: ['auth'],
    summary: "The caller's token name and scope",
    scope: 'read',
    responses: { '200': json(ref('Principal'), 'who you are'), '401': error('no valid credential') },
    handler: (c, _input, { auth }) => c.json(auth.principalOf(c)),
  }),
  defineRoute({
    method: 'post',
    path: '/api/sessions/{id}/stream-ticket',
    operationId: 'streamTicket',
    tags: ['auth'],
    summary: "A short-lived signed ticket that opens this session's event stream (`EventSource` cannot send headers)",
    description:
      'HMAC over the session id, scope and expiry (`http.streamTicketTtl`, default 5 min, never past the login). The stream ends when the ticket expires; reconnects with `Last-Event-ID` work until then, then get a new ticket and resume.',
    scope: 'read',
    responses: {
      '200': json(
        {
          type: 'object',
          required: ['ticket', 'expiresAt', 'url'],
          properties: { ticket: { type: 'string' }, expiresAt: { type: 'integer' }, url: { type: 'string' } },
        },
        'the ticket',
      ),
      '404': error('unknown session'),
      ...MUTATING_ERRORS,
    },
    async handler(c, { id }, { auth, client }) {
      const principal = auth.principalOf(c);
      if (principal === null) throw new HttpError(401, 'no credential');
      await sessionOr404(client, id);
      const { ticket, expiresAt } = auth.issueTicket(principal, id);
      return c.json({
        ticket,
        expiresAt,
        url: `/api/sessions/${encodeURIComponent(id)}/events?ticket=${encodeURIComponent(ticket)}`,
      });
    },
  }),
];
