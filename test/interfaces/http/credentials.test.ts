import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { RunningServer } from '../../../src/interfaces/http/server.ts';
import { httpConfig, serveApi } from '../../support/http.ts';
import { useRuntimeSuite, type Harness } from '../../support/runtime.ts';

/**
 * Credentials bound to the token they came from (issue 25, finding 4), over the real HTTP server
 * and a real Redis: a login cookie and a stream ticket end when their token is rotated (its name
 * bound to a new hash) or removed; login attempts are rate limited per client address.
 */

const sha = (t: string) => createHash('sha256').update(t).digest('hex');
const OLD = 'write-token-old-0123456789abcdef';
const NEW = 'write-token-new-0123456789abcdef';
const READ = 'read-token-0123456789abcdef';
const SECRET = 'a-shared-secret-of-at-least-32-chars!';

let h: Harness;
useRuntimeSuite('http-credentials', {}, (s) => {
  ({ h } = s);
});

function serve(tokens: Array<Record<string, unknown>>): Promise<RunningServer> {
  return serveApi(h.runtime, httpConfig(h.prefix, { secret: SECRET, streamTicketTtl: 60_000, tokens }));
}

const json = { 'content-type': 'application/json' };

async function loginCookie(server: RunningServer, token: string): Promise<string> {
  const r = await fetch(`${server.url}/api/login`, { method: 'POST', headers: json, body: JSON.stringify({ token }) });
  expect(r.status).toBe(200);
  return r.headers.get('set-cookie')?.split(';')[0] ?? '';
}

async function ticketFor(server: RunningServer, cookie: string, sessionId: string): Promise<string> {
  const r = await fetch(`${server.url}/api/sessions/${sessionId}/stream-ticket`, {
    method: 'POST',
    headers: { cookie, origin: server.url },
  });
  expect(r.status).toBe(200);
  return ((await r.json()) as { ticket: string }).ticket;
}

async function streamStatus(server: RunningServer, sessionId: string, ticket: string): Promise<number> {
  const r = await fetch(`${server.url}/api/sessions/${sessionId}/events?ticket=${encodeURIComponent(ticket)}`);
  await r.body?.cancel();
  return r.status;
}

describe('a cookie and a stream ticket are bound to the token they came from', () => {
  const read = { name: 'viewer', scope: 'read', sha256: sha(READ) };

  it('rotating the token (its name bound to a new hash) ends its cookie and its tickets at once; the new token works', async () => {
    const { sessionId } = await h.runtime.enqueue({ prompt: 'rotated' });
    const before = await serve([write(sha(OLD)), read]);
    let cookie: string;
    let ticket: string;
    try {
      cookie = await loginCookie(before, OLD);
      ticket = await ticketFor(before, cookie, sessionId);
      expect((await fetch(`${before.url}/api/whoami`, { headers: { cookie } })).status).toBe(200);
      expect(await streamStatus(before, sessionId, ticket)).toBe(200);
    } finally {
      await before.close(500);
    }
    // The same shared secret (a restart, or another server behind the balancer): unchanged, the cookie still holds there.
    const same = await serve([write(sha(OLD)), read]);
    try {
      expect((await fetch(`${same.url}/api/whoami`, { headers: { cookie } })).status).toBe(200);
    } finally {
      await same.close(500);
    }
    const after = await serve([write(sha(NEW)), read]);
    try {
      const old = await fetch(`${after.url}/api/whoami`, { headers: { cookie } });
      expect(old.status).toBe(401);
      expect(await old.json()).toEqual({ error: 'the token behind this credential was replaced: log in again' });
      expect(await streamStatus(after, sessionId, ticket)).toBe(401);
      expect((await fetch(`${after.url}/api/whoami`, { headers: { authorization: `Bearer ${OLD}` } })).status).toBe(
        401,
      );
      const fresh = await loginCookie(after, NEW);
      expect((await fetch(`${after.url}/api/whoami`, { headers: { cookie: fresh } })).status).toBe(200);
    } finally {
      await after.close(500);
    }
  });

  it('removing the token ends its cookie and its tickets; another token is untouched', async () => {
    const { sessionId } = await h.runtime.enqueue({ prompt: 'removed' });
    const before = await serve([write(sha(OLD)), read]);
    let cookie: string;
    let ticket: string;
    let readerCookie: string;
    try {
      cookie = await loginCookie(before, OLD);
      readerCookie = await loginCookie(before, READ);
      ticket = await ticketFor(before, cookie, sessionId);
    } finally {
      await before.close(500);
    }
    const after = await serve([read]);
    try {
      expect((await fetch(`${after.url}/api/whoami`, { headers: { cookie } })).status).toBe(401);
      expect(await streamStatus(after, sessionId, ticket)).toBe(401);
      expect((await fetch(`${after.url}/api/whoami`, { headers: { cookie: readerCookie } })).status).toBe(200);
    } finally {
      await after.close(500);
    }
  });

  it('a cookie carries neither the token nor its hash, only a keyed fingerprint', async () => {
    const server = await serve([write(sha(OLD))]);
    try {
      const cookie = await loginCookie(server, OLD);
      const claims = Buffer.from(cookie.split('=')[1]?.split('.')[0] ?? '', 'base64url').toString('utf8');
      expect(claims).not.toContain(OLD);
      expect(claims).not.toContain(sha(OLD));
      expect(claims).not.toContain(Buffer.from(sha(OLD), 'hex').toString('base64url'));
      expect(JSON.parse(claims)).toMatchObject({
        p: 'login',
        n: 'ci',
        f: expect.stringMatching(/^[A-Za-z0-9_-]{16,}$/),
      });
    } finally {
      await server.close(500);
    }
  });
});

describe('login attempts are rate limited per client address', () => {
  it('100 wrong tokens: 401 up to the limit, then 429 with Retry-After, the right token too; nothing logged in', async () => {
    const server = await serve([write(sha(OLD))]);
    try {
      const statuses: number[] = [];
      let retryAfter: string | null = null;
      let body: unknown = null;
      for (let i = 0; i < 100; i++) {
        const r = await fetch(`${server.url}/api/login`, {
          method: 'POST',
          headers: json,
          body: JSON.stringify({ token: `wrong-token-${i}-0123456789` }),
        });
        statuses.push(r.status);
        if (r.status === 429 && retryAfter === null) {
          retryAfter = r.headers.get('retry-after');
          body = await r.json();
        } else await r.text();
      }
      const firstRefusal = statuses.indexOf(429);
      expect(firstRefusal).toBe(10);
      expect(statuses.slice(0, 10)).toEqual(Array(10).fill(401));
      expect(statuses.slice(10)).toEqual(Array(90).fill(429));
      expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
      expect(body).toMatchObject({ error: expect.stringMatching(/too many failed logins from this address/) });
      // Refused before the token is even looked at: the right one is refused too, and sets no cookie.
      const right = await fetch(`${server.url}/api/login`, {
        method: 'POST',
        headers: json,
        body: JSON.stringify({ token: OLD }),
      });
      expect(right.status).toBe(429);
      expect(right.headers.get('set-cookie')).toBeNull();
      // A bearer token on other routes is not throttled by it.
      expect((await fetch(`${server.url}/api/whoami`, { headers: { authorization: `Bearer ${OLD}` } })).status).toBe(
        200,
      );
    } finally {
      await server.close(500);
    }
  });
});

function write(hash: string) {
  return { name: 'ci', scope: 'write', sha256: hash };
}
