import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/config.ts';
import { startServer, type RunningServer } from '../../../src/interfaces/http/server.ts';
import { RuntimeMetrics } from '../../../src/runtime/metrics.ts';
import { leftovers } from '../../support/lifecycle.ts';
import type { PiEnv } from '../../support/pi-env.ts';
import { turnEnded, until, useRuntimeSuite, type Harness } from '../../support/runtime.ts';
import { internals } from '../../../src/runtime/internals.ts';
import { clientOver } from '../../../src/api/bind.ts';

/** The lifecycle routes over HTTP: DELETE /api/sessions/:id and the quota errors of the prompt routes. */

let env: PiEnv;
let h: Harness;
let server: RunningServer;
const logLines: string[] = [];

function captureLogger() {
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      logLines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      callback();
    },
  });
  return pino({ level: 'info' }, stream);
}

useRuntimeSuite(
  'http-lifecycle',
  {
    scripts: { 'slow-words': { text: Array.from({ length: 200 }, (_, i) => ` w${i}`), chunkDelayMs: 100 } },
    cleanup: () => server?.close(1000),
  },
  async (s) => {
    ({ env, h } = s);
    await h.startWorker();
    server = await startServer({
      client: clientOver(h.runtime),
      config: loadConfig({ prefix: h.prefix }, {}),
      logger: captureLogger(),
      port: 0,
    });
  },
);

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Body = any;

async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: Body }> {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, body: (await response.json()) as Body };
}

const opts = (model: string) => ({ provider: 'fake', model, cwd: env.cwd });

describe('DELETE /api/sessions/:id', () => {
  it('a finished session: 200 and nothing left; again: 200 deleted false; then its prompts route is a 404', async () => {
    const created = await call('POST', '/api/sessions', { prompt: 'Hello', options: opts('text') });
    expect(created.status).toBe(201);
    const id = created.body.sessionId as string;
    await turnEnded(h.runtime, id);
    // Archived first: the export route gives the archive `sessiond import` takes.
    const exported = await fetch(`${server.url}/api/sessions/${id}/export`);
    expect(exported.status).toBe(200);
    expect(exported.headers.get('content-type')).toContain('application/x-ndjson');
    const archive = await exported.text();
    expect(JSON.parse(archive.split('\n')[0] as string)).toMatchObject({
      kind: 'sessiond.archive',
      version: 1,
      sessionId: id,
    });
    expect(archive.split('\n').slice(1)).toEqual((await h.runtime.exportSession(id)).split('\n').slice(1));
    expect(await call('DELETE', `/api/sessions/${id}`)).toEqual({
      status: 200,
      body: { sessionId: id, deleted: true, cancelled: false },
    });
    expect(await leftovers(internals(h.runtime).redis, internals(h.runtime).keys, id)).toEqual([]);
    expect((await call('GET', `/api/sessions/${id}/export`)).status).toBe(404);
    expect(await call('DELETE', `/api/sessions/${id}`)).toEqual({
      status: 200,
      body: { sessionId: id, deleted: false, cancelled: false },
    });
    // Both calls are in the deletion audit stream, newest first, with who asked (no token configured: open, admin).
    expect((await h.runtime.deletions(2)).map((e) => [e.sessionId, e.outcome, e.actor])).toEqual([
      [id, 'already-deleted', 'http:open(admin)'],
      [id, 'deleted', 'http:open(admin)'],
    ]);
    expect((await call('GET', `/api/sessions/${id}`)).status).toBe(404);
    expect((await call('POST', `/api/sessions/${id}/prompts`, { prompt: 'Still there?' })).status).toBe(404);
    expect(await leftovers(internals(h.runtime).redis, internals(h.runtime).keys, id)).toEqual([]);
    // Audited: one log line names the deletion (never a body or a token).
    expect(logLines.some((l) => l.includes('"audit":"session.delete"') && l.includes(id))).toBe(true);
  });

  it('an event stream of a session that is deleted ends with a session.deleted event', async () => {
    const created = await call('POST', '/api/sessions', { prompt: 'Hello', options: opts('text') });
    const id = created.body.sessionId as string;
    await turnEnded(h.runtime, id);
    const response = await fetch(`${server.url}/api/sessions/${id}/events`, { signal: AbortSignal.timeout(60_000) });
    expect(response.status).toBe(200);
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    // The whole turn first, then the delete while the stream waits for more.
    while (!text.includes('event: terminal.completed')) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`the stream ended before the turn's end: ${text}`);
      text += decoder.decode(value, { stream: true });
    }
    expect((await call('DELETE', `/api/sessions/${id}`)).status).toBe(200);
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    expect(text).toContain(`event: session.deleted\ndata: {"sessionId":"${id}"}`);
  });

  it('an unknown id is a 404; a bad force value a 400 naming it', async () => {
    expect((await call('DELETE', '/api/sessions/no-such-session')).status).toBe(404);
    const bad = await call('DELETE', '/api/sessions/no-such-session?force=maybe');
    expect(bad.status).toBe(400);
    expect(bad.body.issues).toEqual([{ field: 'force', message: 'must be true or false' }]);
  });

  it('a running turn: 409 without force, nothing changed; with force=true it is cancelled first and the session is gone', async () => {
    const created = await call('POST', '/api/sessions', { prompt: 'Talk slowly', options: opts('slow-words') });
    const id = created.body.sessionId as string;
    await until(
      async () => (await h.runtime.readMessages(id)).some((m) => m.type === 'assistant'),
      30_000,
      'the turn to stream',
    );
    const refused = await call('DELETE', `/api/sessions/${id}`);
    expect(refused.status).toBe(409);
    expect(refused.body.error).toContain('is active');
    expect((await h.runtime.getSession(id))?.state).toBe('running');
    expect(await call('DELETE', `/api/sessions/${id}?force=true`)).toEqual({
      status: 200,
      body: { sessionId: id, deleted: true, cancelled: true },
    });
    expect(await leftovers(internals(h.runtime).redis, internals(h.runtime).keys, id)).toEqual([]);
  });
});

describe(
  'GET /api/sessions: cursor pages from the index, ETag / 304 when nothing changed',
  { timeout: 120_000 },
  () => {
    it('walks every session page by page, newest first, none twice; a state filter pages that state only', async () => {
      const ids: string[] = [];
      for (let i = 0; i < 7; i += 1)
        ids.push(
          (await call('POST', '/api/sessions', { prompt: `page ${i}`, options: opts('text') })).body
            .sessionId as string,
        );
      for (const id of ids) await turnEnded(h.runtime, id);
      const all = (await call('GET', '/api/sessions?limit=1000')).body.sessions.map((s: Body) => s.sessionId as string);
      const walked: string[] = [];
      let path = '/api/sessions?limit=3';
      for (let pages = 0; pages < 100; pages += 1) {
        const page = await call('GET', path);
        expect(page.status).toBe(200);
        walked.push(...page.body.sessions.map((s: Body) => s.sessionId as string));
        if (page.body.next === null) break;
        path = `/api/sessions?limit=3&cursor=${encodeURIComponent(page.body.next as string)}`;
      }
      expect(walked).toEqual(all);
      expect(walked).toEqual(expect.arrayContaining(ids));

      const completed: Body[] = [];
      let next: string | null = null;
      do {
        const page = await call(
          'GET',
          `/api/sessions?state=completed&limit=2${next === null ? '' : `&cursor=${encodeURIComponent(next)}`}`,
        );
        completed.push(...page.body.sessions);
        next = page.body.next as string | null;
      } while (next !== null);
      expect(completed.every((s) => s.state === 'completed')).toBe(true);
      expect(completed.map((s) => s.sessionId)).toEqual(expect.arrayContaining(ids));

      const bad = await call('GET', '/api/sessions?cursor=not-a-cursor');
      expect(bad.status).toBe(400);
      expect(bad.body.issues).toEqual([{ field: 'cursor', message: 'must be the `next` of an earlier page' }]);
    });

    it('answers 304 to the ETag of an unchanged listing, and 200 with a new ETag after a prompt or a delete', async () => {
      const created = await call('POST', '/api/sessions', { prompt: 'Tag me', options: opts('text') });
      const id = created.body.sessionId as string;
      await turnEnded(h.runtime, id);
      await until(
        async () => (await internals(h.runtime).redis.hget(`{${h.prefix}}:states`, id)) === 'completed',
        5000,
        'the index',
      );
      const first = await fetch(`${server.url}/api/sessions`);
      const etag = first.headers.get('etag');
      expect(first.status).toBe(200);
      expect(etag).toMatch(/^W\/".+"$/);
      const again = await fetch(`${server.url}/api/sessions`, { headers: { 'If-None-Match': etag ?? '' } });
      expect(again.status).toBe(304);
      expect(await again.text()).toBe('');
      // Another query is another ETag.
      expect(
        (await fetch(`${server.url}/api/sessions?limit=5`, { headers: { 'If-None-Match': etag ?? '' } })).status,
      ).toBe(200);

      await call('POST', `/api/sessions/${id}/prompts`, { prompt: 'Changed' });
      const changed = await fetch(`${server.url}/api/sessions`, { headers: { 'If-None-Match': etag ?? '' } });
      expect(changed.status).toBe(200);
      const etag2 = changed.headers.get('etag');
      expect(etag2).not.toBe(etag);
      await turnEnded(h.runtime, id, 2);
      await call('DELETE', `/api/sessions/${id}`);
      const afterDelete = await fetch(`${server.url}/api/sessions`, { headers: { 'If-None-Match': etag2 ?? '' } });
      expect(afterDelete.status).toBe(200);
      expect(((await afterDelete.json()) as Body).sessions.map((s: Body) => s.sessionId)).not.toContain(id);
    });

    it('/metrics counts sessions by state from the index, without reading sessions that did not change', async () => {
      await until(
        async () => (await internals(h.runtime).redis.zcard(`{${h.prefix}}:state:completed`)) > 0,
        5000,
        'completed sessions',
      );
      const completed = await internals(h.runtime).redis.zcard(`{${h.prefix}}:state:completed`);
      // Forget what changed: a refresh has no session to read, and the counts are still whole.
      await internals(h.runtime).redis.del(`{${h.prefix}}:changed`);
      const metrics = new RuntimeMetrics(h.runtime, { cacheMs: 0 });
      const text = await metrics.render();
      expect(text).toContain(`sessiond_sessions{state="completed"} ${completed}`);
    });
  },
);
