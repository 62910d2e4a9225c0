import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { RunningServer } from '../../../src/interfaces/http/server.ts';
import { internals } from '../../../src/runtime/internals.ts';
import { OwnerSessions, PRUNE_AFTER_MS } from '../../../src/runtime/limits/owner-sessions.ts';
import { httpConfig, postJson, serveApi } from '../../support/http.ts';
import { useRuntimeSuite, type Harness } from '../../support/runtime.ts';

/**
 * Per-token caps (issue 25, finding 5), over the real HTTP server and a real Redis: sessions a
 * token created that exist at once (`maxSessions`), live event streams one token holds on a server
 * (`maxStreams`, its cookie and tickets included). Past a cap: 429 naming it, nothing written.
 */

const sha = (t: string) => createHash('sha256').update(t).digest('hex');
const CAPPED = 'capped-token-0123456789abcdef';
const READER = 'reader-token-0123456789abcdef';
const OTHER = 'other-token-0123456789abcdef';
const TOKENS = [
  { name: 'capped', scope: 'write', sha256: sha(CAPPED), maxSessions: 2 },
  { name: 'reader', scope: 'read', sha256: sha(READER), maxStreams: 2 },
  { name: 'other', scope: 'write', sha256: sha(OTHER) },
];

let h: Harness;
useRuntimeSuite('http-caps', {}, (s) => {
  ({ h } = s);
});

function serve(): Promise<RunningServer> {
  return serveApi(h.runtime, httpConfig(h.prefix, { tokens: TOKENS, streamTicketTtl: 60_000 }));
}

function create(api: RunningServer, token: string, body: Record<string, unknown>) {
  return postJson(api, '/api/sessions', token, body);
}

describe('maxSessions: sessions a token created that exist at once', () => {
  it('the third session of a token capped at 2 is 429 naming maxSessions, nothing written; prompts to its sessions and other tokens go on', async () => {
    const api = await serve();
    try {
      const first = await create(api, CAPPED, { prompt: 'one' });
      const second = await create(api, CAPPED, { prompt: 'two' });
      expect([first.status, second.status]).toEqual([201, 201]);
      const third = await create(api, CAPPED, { prompt: 'three', sessionId: 'over-the-cap' });
      expect(third.status).toBe(429);
      expect(third.body).toMatchObject({
        limit: 'maxSessions',
        max: 2,
        error: expect.stringMatching(/the token "capped" already has 2 sessions/),
      });
      expect(await h.runtime.getSession('over-the-cap')).toBeNull();
      // Its existing sessions still take prompts (also through POST /api/sessions naming one), and another token is not capped by it.
      expect((await create(api, CAPPED, { prompt: 'again', sessionId: first.body.sessionId })).status).toBe(202);
      const prompt = await fetch(`${api.url}/api/sessions/${first.body.sessionId as string}/prompts`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${CAPPED}` },
        body: JSON.stringify({ prompt: 'more' }),
      });
      expect(prompt.status).toBe(202);
      expect((await create(api, OTHER, { prompt: 'not capped' })).status).toBe(201);
    } finally {
      await api.close(500);
    }
  });

  it('a deleted session gives its slot back (once its reservation is older than PRUNE_AFTER_MS)', async () => {
    const { redis, keys } = internals(h.runtime);
    const owners = new OwnerSessions(redis, keys);
    const t0 = Date.now();
    const a = await h.runtime.enqueue({ prompt: 'a' });
    const b = await h.runtime.enqueue({ prompt: 'b' });
    expect(await owners.reserve('pruned', a.sessionId, 2, t0)).toEqual({ ok: true, reserved: true });
    expect(await owners.reserve('pruned', b.sessionId, 2, t0)).toEqual({ ok: true, reserved: true });
    expect(await owners.reserve('pruned', 'c', 2, t0)).toEqual({ ok: false, count: 2 });
    await h.runtime.deleteSession(a.sessionId, { force: true });
    // Too young to prune: it may be a session being created.
    expect(await owners.reserve('pruned', 'c', 2, t0 + 1000)).toEqual({ ok: false, count: 2 });
    expect(await owners.reserve('pruned', 'c', 2, t0 + PRUNE_AFTER_MS + 1)).toEqual({ ok: true, reserved: true });
    expect(await owners.count('pruned')).toBe(2);
  });
});

describe('maxStreams: live event streams one token holds on a server', () => {
  it('a read token capped at 2: the third stream is 429 naming maxStreams (bearer, then a ticket); closing one frees a slot; another token is not capped by it', async () => {
    const api = await serve();
    const { sessionId } = await h.runtime.enqueue({ prompt: 'watched' });
    const open: Response[] = [];
    try {
      const events = `${api.url}/api/sessions/${sessionId}/events`;
      for (let i = 0; i < 2; i++) {
        const r = await fetch(events, { headers: { authorization: `Bearer ${READER}` } });
        expect(r.status).toBe(200);
        open.push(r);
      }
      const third = await fetch(events, { headers: { authorization: `Bearer ${READER}` } });
      expect(third.status).toBe(429);
      expect(third.headers.get('retry-after')).toBe('5');
      expect(await third.json()).toMatchObject({
        limit: 'maxStreams',
        max: 2,
        error: expect.stringMatching(/the token "reader" already holds 2 live event streams/),
      });
      const { ticket } = (await (
        await fetch(`${api.url}/api/sessions/${sessionId}/stream-ticket`, {
          method: 'POST',
          headers: { authorization: `Bearer ${READER}` },
        })
      ).json()) as {
        ticket: string;
      };
      const byTicket = await fetch(`${events}?ticket=${encodeURIComponent(ticket)}`);
      expect(byTicket.status).toBe(429);
      await byTicket.text();
      const other = await fetch(events, { headers: { authorization: `Bearer ${OTHER}` } });
      expect(other.status).toBe(200);
      open.push(other);
      await open.shift()?.body?.cancel();
      let again: Response | null = null;
      for (let i = 0; i < 50 && again?.status !== 200; i++) {
        await again?.text();
        again = await fetch(events, { headers: { authorization: `Bearer ${READER}` } });
        if (again.status !== 200) await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(again?.status).toBe(200);
      if (again !== null) open.push(again);
    } finally {
      for (const r of open) await r.body?.cancel().catch(() => undefined);
      await api.close(500);
    }
  });
});
