import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/config.ts';
import { startServer, type RunningServer } from '../../../src/interfaces/http/server.ts';
import { leftovers } from '../../support/lifecycle.ts';
import type { PiEnv } from '../../support/pi-env.ts';
import { turnEnded, until, useRuntimeSuite, type Harness } from '../../support/runtime.ts';

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

useRuntimeSuite('http-lifecycle', { scripts: { 'slow-words': { text: Array.from({ length: 200 }, (_, i) => ` w${i}`), chunkDelayMs: 100 } }, cleanup: () => server?.close(1000) }, async (s) => {
  ({ env, h } = s);
  await h.startWorker();
  server = await startServer({ runtime: h.runtime, config: loadConfig({ prefix: h.prefix }, {}), logger: captureLogger(), port: 0 });
});

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Body = any;

async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: Body }> {
  const response = await fetch(`${server.url}${path}`, { method, headers: body === undefined ? {} : { 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  return { status: response.status, body: (await response.json()) as Body };
}

const opts = (model: string) => ({ provider: 'fake', model, cwd: env.cwd });

describe('DELETE /api/sessions/:id', () => {
  it('a finished session: 200 and nothing left; again: 200 deleted false; then its prompts route is a 404', async () => {
    const created = await call('POST', '/api/sessions', { prompt: 'Hello', options: opts('text') });
    expect(created.status).toBe(201);
    const id = created.body.sessionId as string;
    await turnEnded(h.runtime, id);
    expect(await call('DELETE', `/api/sessions/${id}`)).toEqual({ status: 200, body: { sessionId: id, deleted: true, cancelled: false } });
    expect(await leftovers(h.runtime.redis, h.runtime.keys, id)).toEqual([]);
    expect(await call('DELETE', `/api/sessions/${id}`)).toEqual({ status: 200, body: { sessionId: id, deleted: false, cancelled: false } });
    expect((await call('GET', `/api/sessions/${id}`)).status).toBe(404);
    expect((await call('POST', `/api/sessions/${id}/prompts`, { prompt: 'Still there?' })).status).toBe(404);
    expect(await leftovers(h.runtime.redis, h.runtime.keys, id)).toEqual([]);
    // Audited: one log line names the deletion (never a body or a token).
    expect(logLines.some((l) => l.includes('"audit":"session.delete"') && l.includes(id))).toBe(true);
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
    await until(async () => (await h.runtime.readMessages(id)).some((m) => m.type === 'assistant'), 30_000, 'the turn to stream');
    const refused = await call('DELETE', `/api/sessions/${id}`);
    expect(refused.status).toBe(409);
    expect(refused.body.error).toContain('is active');
    expect((await h.runtime.getSession(id))?.state).toBe('running');
    expect(await call('DELETE', `/api/sessions/${id}?force=true`)).toEqual({ status: 200, body: { sessionId: id, deleted: true, cancelled: true } });
    expect(await leftovers(h.runtime.redis, h.runtime.keys, id)).toEqual([]);
  });
});
