import { Writable } from 'node:stream';
import { pino } from 'pino';
import { seedApproval } from '../../support/approvals.ts';
import { describe, expect, it } from 'vitest';
import { loadConfig, type Config } from '../../../src/config/config.ts';
import { createApp } from '../../../src/interfaces/http/app.ts';
import { openApiDocument, REQUEST_EXAMPLES } from '../../../src/interfaces/http/openapi.ts';
import { ApprovalBody } from '../../../src/interfaces/http/routes/approvals.ts';
import { CancelBody } from '../../../src/interfaces/http/routes/controls.ts';
import { ForkBody, UndoBody } from '../../../src/interfaces/http/routes/workspace.ts';
import { DispatchBody } from '../../../src/interfaces/http/routes/limits.ts';
import { ReplayBody } from '../../../src/interfaces/http/routes/webhooks.ts';
import { PromptBody } from '../../../src/interfaces/http/routes/prompts.ts';
import { CreateSessionBody } from '../../../src/interfaces/http/routes/sessions.ts';
import { ScheduleRequestSchema } from '../../../src/runtime/schedules/spec.ts';
import { LoginBody } from '../../../src/interfaces/http/auth/routes.ts';
import { startServer, type RunningServer } from '../../../src/interfaces/http/server.ts';
import { DEFAULT_RETRY_POLICY, mergeRetryPolicy } from '../../../src/retry/index.ts';
import { Runtime } from '../../../src/runtime/runtime.ts';
import { DEFAULT_TEXT, type FakeModelServer } from '../../support/fake-model-server.ts';
import { type PiEnv } from '../../support/pi-env.ts';
import { startRedis, uniquePrefix, type RedisServer } from '../../support/redis.ts';
import { connector, until, useRuntimeSuite, type Harness } from '../../support/runtime.ts';
import { asMessage, readSse, type StreamedMessage } from './sse-client.ts';
import { internals } from '../../../src/runtime/internals.ts';
import { clientOver } from '../../../src/api/bind.ts';

const TOKEN = 'test-token-0123456789abcdef';
const SLOW_WORDS = Array.from({ length: 40 }, (_, i) => (i === 0 ? 'word0' : ` word${i}`));

let redis: RedisServer;
let model: FakeModelServer;
let env: PiEnv;
let h: Harness;
let config: Config;
let server: RunningServer;
const logLines: string[] = [];

function captureLogger() {
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      logLines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      callback();
    },
  });
  return pino(
    { level: 'info', redact: { paths: ['token', 'authorization', '*.token', '*.authorization'], censor: '***' } },
    stream,
  );
}

useRuntimeSuite(
  'http-api',
  {
    scripts: { 'slow-text': { text: SLOW_WORDS, chunkDelayMs: 60 }, flaky: [{ status: 500 }, { text: DEFAULT_TEXT }] },
    cleanup: () => server?.close(1000),
  },
  async (s) => {
    ({ redis, server: model, env, h } = s);
    await h.startWorker();
    config = loadConfig({ prefix: h.prefix, 'http.bodyLimitBytes': 4096 }, {});
    server = await startServer({
      client: clientOver(h.runtime),
      config,
      logger: captureLogger(),
      port: 0,
      keepAliveMs: 200,
    });
    // The first scrape: the histograms count from here on (the /metrics test reads what the tests below ran).
    await fetch(`${server.url}/metrics`);
  },
);

/**
 * The session once its turn `turn` has ended, judged from the snapshot's own turn status
 * (getSession reads meta.state and the snapshot in two commands: they can disagree for a moment).
 */
function turnEnded(runtime: Runtime, sessionId: string, turn = 1, timeoutMs = 60_000) {
  return until(
    async () => {
      const s = await runtime.getSession(sessionId);
      const t = s?.context?.turn;
      return t !== undefined &&
        t !== null &&
        t.index === turn &&
        ['completed', 'failed', 'cancelled'].includes(t.status)
        ? s
        : null;
    },
    timeoutMs,
    `turn ${turn} of ${sessionId} to end`,
  );
}

const opts = (modelId: string) => ({ provider: 'fake', model: modelId, cwd: env.cwd });

// Response bodies are checked field by field with toMatchObject/toEqual.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Body = any;

async function call(
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Body; headers: Headers }> {
  const init: RequestInit = {
    method,
    headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
  };
  if (body !== undefined) init.body = typeof body === 'string' ? body : JSON.stringify(body);
  const response = await fetch(`${server.url}${path}`, init);
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON (metrics, html)
  }
  return { status: response.status, body: parsed, headers: response.headers };
}

async function createSession(modelId: string, extra: Record<string, unknown> = {}): Promise<string> {
  const r = await call('POST', '/api/sessions', { prompt: `run ${modelId}`, options: opts(modelId), ...extra });
  expect(r.status).toBe(201);
  return r.body.sessionId as string;
}

describe('sessions', () => {
  it('POST /api/sessions → 201, the worker runs it, GET shows state, attempts, history and context; the list filters by state', async () => {
    const created = await call('POST', '/api/sessions', { prompt: 'Say hello', options: opts('text') });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ turn: 1, created: true });
    const id = created.body.sessionId as string;
    await turnEnded(h.runtime, id);

    const got = await call('GET', `/api/sessions/${id}`);
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({
      sessionId: id,
      state: 'completed',
      agent: 'pi',
      turn: { index: 1, status: 'completed', attempts: [{ attempt: 1, outcome: 'completed' }] },
    });
    expect(got.body.history.map((t: { to: string }) => t.to)).toEqual(expect.arrayContaining(['running', 'completed']));
    expect(got.body.context).toMatchObject({ sessionId: id, turnIndex: 1 });
    expect(got.body.options).toMatchObject({ model: 'text' });

    const completed = await call('GET', '/api/sessions?state=completed');
    expect(completed.status).toBe(200);
    expect(completed.body.sessions).toContainEqual(
      expect.objectContaining({
        sessionId: id,
        state: 'completed',
        agent: 'pi',
        turn: expect.objectContaining({ index: 1, status: 'completed', attempts: 1 }),
      }),
    );
    const running = await call('GET', '/api/sessions?state=running');
    expect(running.body.sessions.map((s: { sessionId: string }) => s.sessionId)).not.toContain(id);
    const all = await call('GET', '/api/sessions?limit=1000');
    expect(all.body.sessions.map((s: { sessionId: string }) => s.sessionId)).toContain(id);

    const again = await call('POST', `/api/sessions/${id}/prompts`, { prompt: 'And again' });
    expect(again.status).toBe(202);
    expect(again.body).toEqual({ sessionId: id, turn: 2, promptId: expect.any(String) });
    await turnEnded(h.runtime, id, 2);
    expect((await call('GET', `/api/sessions/${id}`)).body.turn).toMatchObject({ index: 2, status: 'completed' });

    // POST with the id of an existing session adds the prompt to it: 202, not 201.
    const existing = await call('POST', '/api/sessions', { sessionId: id, prompt: 'third' });
    expect(existing.status).toBe(202);
    expect(existing.body).toMatchObject({ sessionId: id, turn: 3, created: false });
    await turnEnded(h.runtime, id, 3);
  });

  it('the list filters by a piece of the id, the agent and the update time, page by page with `next`', async () => {
    const client = clientOver(h.runtime);
    // Dispatch paused: the sessions stay queued (nothing runs), and are deleted before it resumes.
    await client.dispatch.pause();
    const made: string[] = [];
    try {
      const needle = `Needle-${Date.now()}`;
      made.push((await h.runtime.enqueue({ sessionId: needle, prompt: 'old', options: { agent: 'codex' } })).sessionId);
      // Once it waits for dispatch, nothing changes it (the update time is the last change).
      await until(
        async () => ((await client.session(needle).inspect())?.state === 'waiting' ? true : null),
        30_000,
        'waiting',
      );
      const between = Date.now() + 1;
      await new Promise((r) => setTimeout(r, 5));
      for (let i = 0; i < 5; i++)
        made.push((await h.runtime.enqueue({ prompt: `newer ${i}`, options: opts('text') })).sessionId);
      const ids = (r: { body: { sessions: Array<{ sessionId: string }> } }) => r.body.sessions.map((s) => s.sessionId);
      // The newest five come first: the needle is not on a first page of five.
      expect(ids(await call('GET', '/api/sessions?limit=5'))).not.toContain(needle);
      for (const query of [`q=${needle.slice(0, 10).toLowerCase()}`, 'agent=codex', `agent=codex&q=needle`]) {
        const found = await call('GET', `/api/sessions?limit=5&${query}`);
        expect(found.status, query).toBe(200);
        expect(ids(found), query).toEqual([needle]);
        expect(found.body.sessions[0], query).toMatchObject({ agent: 'codex' });
        expect(found.body.scanned, query).toBeGreaterThanOrEqual(6);
      }
      expect(ids(await call('GET', `/api/sessions?agent=codex&state=completed`))).toEqual([]);
      expect(ids(await call('GET', `/api/sessions?q=${needle}&updatedSince=${between}`))).toEqual([]);
      const iso = new Date(between - 60_000).toISOString();
      expect(ids(await call('GET', `/api/sessions?q=${needle}&updatedSince=${iso}`))).toEqual([needle]);
      // The five newer ones, two by two: each page's `next` goes on where it stopped, nothing twice, nothing left out.
      const newer = made.slice(1).reverse();
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const page: Awaited<ReturnType<typeof call>> = await call(
          'GET',
          `/api/sessions?limit=2&agent=pi&updatedSince=${between}${cursor === null ? '' : `&cursor=${cursor}`}`,
        );
        expect(page.status).toBe(200);
        expect(page.body.sessions.length).toBeLessThanOrEqual(2);
        seen.push(...ids(page));
        cursor = page.body.next;
      } while (cursor !== null);
      expect(seen.filter((id) => newer.includes(id))).toEqual(newer);
    } finally {
      for (const id of made) await client.session(id).delete({ force: true });
      await client.dispatch.resume();
    }
  });

  it('cancel: POST /api/sessions/:id/cancel stops a long tool call → 202 and the turn ends cancelled', async () => {
    const id = await createSession('long-tool');
    await until(
      async () => (await h.runtime.readMessages(id)).some((m) => m.type === 'tool.call'),
      60_000,
      'the tool call',
    );
    const r = await call('POST', `/api/sessions/${id}/cancel`, { reason: 'test says stop' });
    expect(r.status).toBe(202);
    expect(r.body).toMatchObject({ sessionId: id, delivered: expect.stringMatching(/^(worker|activation)$/) });
    const ended = await turnEnded(h.runtime, id);
    expect(ended?.context?.turn?.status).toBe('cancelled');
    const got = await call('GET', `/api/sessions/${id}`);
    expect(got.body.turn).toMatchObject({ status: 'cancelled', cancelReason: 'test says stop' });
    // An empty body is fine too.
    const empty = await fetch(`${server.url}/api/sessions/${id}/cancel`, { method: 'POST' });
    expect(empty.status).toBe(202);
  });

  it('whenBusy: reject while a turn runs → 409 with nothing stored; interrupt → 202, the running turn ends cancelled (interrupted), the prompt runs next', async () => {
    const id = await createSession('long-tool');
    await until(
      async () => (await h.runtime.readMessages(id)).some((m) => m.type === 'tool.call'),
      60_000,
      'the tool call',
    );
    const rejected = await call('POST', `/api/sessions/${id}/prompts`, { prompt: 'No', whenBusy: 'reject' });
    expect(rejected.status).toBe(409);
    expect(rejected.body.error).toContain('whenBusy "reject"');
    expect(await h.runtime.queuedPrompts(id)).toEqual([]);
    const bad = await call('POST', `/api/sessions/${id}/prompts`, { prompt: 'No', whenBusy: 'later' });
    expect(bad.status).toBe(400);
    expect(bad.body.issues.map((i: { field: string }) => i.field)).toEqual(['whenBusy']);
    // A steer: 202 with its promptId, pending in the session view (the interrupt's turn takes it at its start).
    const steer = await call('POST', `/api/sessions/${id}/prompts`, { prompt: 'Mind the tests', whenBusy: 'steer' });
    expect(steer.status).toBe(202);
    expect(steer.body).toEqual({ sessionId: id, turn: 1, promptId: expect.any(String), steered: true });
    expect((await call('GET', `/api/sessions/${id}`)).body.steers).toEqual([
      { id: steer.body.promptId, text: 'Mind the tests', acceptedAt: expect.any(Number) },
    ]);
    const r = await call('POST', `/api/sessions/${id}/prompts`, {
      prompt: 'Instead',
      options: { model: 'text' },
      whenBusy: 'interrupt',
    });
    expect(r.status).toBe(202);
    expect(r.body).toEqual({ sessionId: id, turn: 2, promptId: expect.any(String) });
    // pi steers natively, once its turn has a first answer: turn 2 (one text answer) ends before it takes the
    // steer, so the steer becomes the next turn (`via: "turn"`), not lost.
    const steered = await until(
      async () => {
        const found = (await h.runtime.readMessages(id)).filter((m) => m.type === 'prompt.steered');
        return found.length > 0 ? found : null;
      },
      60_000,
      'the steer in the log',
    );
    expect(steered).toMatchObject([{ turn: 3, attempt: 0, content: { promptId: steer.body.promptId, via: 'turn' } }]);
    const log = await h.runtime.readMessages(id);
    expect(log.filter((m) => m.turn === 1 && m.type.startsWith('terminal.')).map((m) => m.content)).toEqual([
      { reason: 'interrupted' },
    ]);
    expect(log.filter((m) => m.turn === 2 && m.type.startsWith('terminal.')).map((m) => m.type)).toEqual([
      'terminal.completed',
    ]);
    // Turn 3 runs the session's long tool: cancelled, so the test leaves nothing running.
    expect((await call('POST', `/api/sessions/${id}/cancel`, {})).status).toBe(202);
    expect((await turnEnded(h.runtime, id, 3)).state).toBe('cancelled');
  });

  it('unknown ids are 404 on every session endpoint, as JSON', async () => {
    const ghost = 'no-such-session';
    const cases: Array<[string, string, unknown?]> = [
      ['GET', `/api/sessions/${ghost}`],
      ['POST', `/api/sessions/${ghost}/prompts`, { prompt: 'hi' }],
      ['POST', `/api/sessions/${ghost}/cancel`, {}],
      ['GET', `/api/sessions/${ghost}/messages`],
      ['GET', `/api/sessions/${ghost}/events`],
      ['GET', `/api/sessions/${ghost}/retry-policy`],
      ['PUT', `/api/sessions/${ghost}/retry-policy`, { maxAttempts: 2 }],
      ['DELETE', `/api/sessions/${ghost}/retry-policy`],
      ['GET', '/api/sessions/bad%20id!'],
    ];
    for (const [method, path, body] of cases) {
      const r = await call(method, path, body);
      expect(r.status, `${method} ${path}`).toBe(404);
      expect(r.body.error, `${method} ${path}`).toMatch(/unknown session/);
      // The library's code for the same case (hasErrorCode(error, 'not_found')).
      expect(r.body.code, `${method} ${path}`).toBe('not_found');
    }
    // No session was created by any of these.
    expect(await h.runtime.getSession(ghost)).toBeNull();
  });

  it('unknown routes are 404 JSON', async () => {
    const r = await call('GET', '/api/nope');
    expect(r.status).toBe(404);
    expect(r.body).toEqual({ error: 'no route for GET /api/nope' });
    expect((await call('DELETE', '/api/chart')).status).toBe(404);
  });
});

describe('bad requests: 400 naming the field, nothing written', () => {
  it('POST /api/sessions: each field', async () => {
    const before = (await h.runtime.listSessions()).length;
    const cases: Array<[unknown, string]> = [
      [{}, 'prompt'],
      [{ prompt: '' }, 'prompt'],
      [{ prompt: '   ' }, 'prompt'],
      [{ prompt: 42 }, 'prompt'],
      [{ prompt: 'x'.repeat(200_001) }, 'prompt'],
      [{ prompt: 'hi', sessionId: 'bad id!' }, 'sessionId'],
      [{ prompt: 'hi', options: { model: '' } }, 'options.model'],
      [{ prompt: 'hi', options: { thinking: 'maximal' } }, 'options.thinking'],
      [{ prompt: 'hi', options: { agent: 'nope' } }, 'options.agent'],
      [{ prompt: 'hi', options: { idleTimeoutMs: 5 } }, 'options.idleTimeoutMs'],
      [{ prompt: 'hi', options: { tools: ['rm -rf'] } }, 'options.tools.0'],
      [{ prompt: 'hi', options: { command: '/bin/sh' } }, 'options'],
      [{ prompt: 'hi', retryPolicy: { maxAttempts: 0 } }, 'retryPolicy.maxAttempts'],
      [{ prompt: 'hi', retryPolicy: { jitter: 'lots' } }, 'retryPolicy.jitter'],
      [{ prompt: 'hi', extra: 1 }, '(body)'],
      [[1, 2], '(body)'],
    ];
    for (const [body, field] of cases) {
      // The 200 000-character prompt is over this server's 4 KiB body limit: 413, checked below.
      if (JSON.stringify(body).length > config.http.bodyLimitBytes) continue;
      const r = await call('POST', '/api/sessions', body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.error).toBeTypeOf('string');
      expect(
        r.body.issues.map((i: { field: string }) => i.field),
        JSON.stringify(body),
      ).toContain(field);
      for (const issue of r.body.issues) expect(issue.message).toBeTypeOf('string');
    }
    expect((await h.runtime.listSessions()).length).toBe(before);
  });

  it('POST prompts / cancel, and query parameters', async () => {
    const id = await createSession('text');
    await turnEnded(h.runtime, id);
    const bad: Array<[string, string, unknown, string]> = [
      ['POST', `/api/sessions/${id}/prompts`, {}, 'prompt'],
      ['POST', `/api/sessions/${id}/prompts`, { prompt: '' }, 'prompt'],
      ['POST', `/api/sessions/${id}/prompts`, { prompt: 'x', sessionId: 'other' }, '(body)'],
      ['POST', `/api/sessions/${id}/prompts`, { prompt: 'x', options: { thinking: 'x' } }, 'options.thinking'],
      ['POST', `/api/sessions/${id}/cancel`, { reason: '' }, 'reason'],
      ['POST', `/api/sessions/${id}/cancel`, { reason: 5 }, 'reason'],
      ['POST', `/api/sessions/${id}/cancel`, { why: 'x' }, '(body)'],
      ['GET', '/api/sessions?state=bogus', undefined, 'state'],
      ['GET', '/api/sessions?limit=0', undefined, 'limit'],
      ['GET', '/api/sessions?limit=abc', undefined, 'limit'],
      ['GET', '/api/sessions?q=', undefined, 'q'],
      ['GET', `/api/sessions?q=${'x'.repeat(101)}`, undefined, 'q'],
      ['GET', '/api/sessions?agent=no%20such', undefined, 'agent'],
      ['GET', '/api/sessions?updatedSince=yesterday', undefined, 'updatedSince'],
      ['GET', '/api/sessions?updatedSince=-5', undefined, 'updatedSince'],
      ['GET', `/api/sessions/${id}/messages?from=0`, undefined, 'from'],
      ['GET', `/api/sessions/${id}/messages?limit=5000`, undefined, 'limit'],
      ['GET', `/api/sessions/${id}/events?from=-1`, undefined, 'from'],
    ];
    for (const [method, path, body, field] of bad) {
      const r = await call(method, path, body);
      expect(r.status, `${method} ${path} ${JSON.stringify(body)}`).toBe(400);
      expect(
        r.body.issues.map((i: { field: string }) => i.field),
        `${method} ${path}`,
      ).toContain(field);
    }
    const events = await fetch(`${server.url}/api/sessions/${id}/events`, { headers: { 'Last-Event-ID': 'abc' } });
    expect(events.status).toBe(400);
    expect(((await events.json()) as { issues: Array<{ field: string }> }).issues[0]?.field).toBe('Last-Event-ID');
    expect((await h.runtime.getSession(id))?.context?.turnIndex).toBe(1);
  });

  it('malformed JSON → 400; a body not sent as JSON → 415; over the body limit → 413', async () => {
    const malformed = await call('POST', '/api/sessions', '{"prompt": ');
    expect(malformed.status).toBe(400);
    expect(malformed.body.error).toMatch(/malformed JSON/);
    expect(malformed.body.issues).toEqual([{ field: '(body)', message: 'must be valid JSON' }]);

    const form = await fetch(`${server.url}/api/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: JSON.stringify({ prompt: 'hi' }),
    });
    expect(form.status).toBe(415);

    const big = await call('POST', '/api/sessions', { prompt: 'x'.repeat(5000) });
    expect(big.status).toBe(413);
    expect(big.body.error).toMatch(/at most 4096 bytes/);
    const bigPolicy = await call('PUT', '/api/retry-policy', { retryOn: Array.from({ length: 600 }, () => 'network') });
    expect(bigPolicy.status).toBe(413);
  });
});

describe('messages', () => {
  it('GET /messages pages from a seq', async () => {
    const id = await createSession('text');
    await turnEnded(h.runtime, id);
    const all = await h.runtime.readMessages(id);
    expect(all.length).toBeGreaterThan(3);
    const first = await call('GET', `/api/sessions/${id}/messages?limit=2`);
    expect(first.status).toBe(200);
    expect(first.body.messages.map((m: { seq: number }) => m.seq)).toEqual([1, 2]);
    expect(first.body).toMatchObject({ sessionId: id, from: 1, nextFrom: 3, lastSeq: all.length });
    const rest = await call('GET', `/api/sessions/${id}/messages?from=${first.body.nextFrom}&limit=1000`);
    expect([...first.body.messages, ...rest.body.messages]).toEqual(all);
    const past = await call('GET', `/api/sessions/${id}/messages?from=${all.length + 1}`);
    expect(past.body).toMatchObject({ messages: [], nextFrom: all.length + 1 });
  });

  it('SSE: streams live, resumes from Last-Event-ID with no gap and no duplicate, sends keep-alives, and shares one Redis reader', async () => {
    const id = await createSession('slow-text');
    const first = new AbortController();
    const r1 = await fetch(`${server.url}/api/sessions/${id}/events`, { signal: first.signal });
    expect(r1.status).toBe(200);
    expect(r1.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const got: StreamedMessage[] = [];
    for await (const frame of readSse(r1)) {
      const m = asMessage(frame);
      if (m !== null) got.push(m);
      if (got.filter((x) => x.event === 'assistant').length >= 3) break;
    }
    first.abort();
    const last = got.at(-1);
    expect(last).toBeDefined();
    // The writer is still streaming: the rest arrives on the resumed stream.
    expect((await h.runtime.getSession(id))?.state).toBe('running');

    const second = new AbortController();
    const r2 = await fetch(`${server.url}/api/sessions/${id}/events`, {
      signal: second.signal,
      headers: { 'Last-Event-ID': last?.id ?? '' },
    });
    let keepAlives = 0;
    for await (const frame of readSse(r2)) {
      if (frame.comment === 'keep-alive') keepAlives += 1;
      const m = asMessage(frame);
      if (m !== null) got.push(m);
      if (m?.event === 'terminal.completed' && keepAlives > 0) break;
      if (m?.event === 'terminal.failed') break;
    }
    second.abort();
    expect(keepAlives).toBeGreaterThan(0);

    const stored = await h.runtime.readMessages(id);
    const seqs = got.map((m) => m.message.seq);
    expect(seqs).toEqual(stored.map((m) => m.seq)); // 1..n: no gap, no duplicate
    for (const m of got) {
      expect(m.id).toBe(String(m.message.seq));
      expect(m.event).toBe(m.message.type);
    }
    expect(got.map((m) => m.message)).toEqual(stored);
    expect(
      got
        .filter((m) => m.event === 'assistant')
        .map((m) => (m.message.content as { text: string }).text)
        .join(''),
    ).toBe(SLOW_WORDS.join(''));

    // ?from= starts at that seq.
    const third = new AbortController();
    const r3 = await fetch(`${server.url}/api/sessions/${id}/events?from=3`, { signal: third.signal });
    for await (const frame of readSse(r3)) {
      const m = asMessage(frame);
      if (m === null) continue;
      expect(m.message.seq).toBe(3);
      break;
    }
    third.abort();

    // Streams share the hub's one blocking reader: no connection of their own.
    const list = (await internals(h.runtime).redis.client('LIST')) as string;
    expect(list).not.toContain('name=test:follow');
    expect(list.split('\n').filter((l) => l.includes('name=test:stream-hub'))).toHaveLength(1);
    await until(async () => h.runtime.messageHub.followers === 0, 5000, 'the followers to leave the hub');
  });

  it('closing the server ends live streams', async () => {
    const other = await startServer({ client: clientOver(h.runtime), config, logger: captureLogger(), port: 0 });
    const id = await createSession('text');
    await turnEnded(h.runtime, id);
    const response = await fetch(`${other.url}/api/sessions/${id}/events`);
    const frames = readSse(response);
    await frames.next();
    const started = Date.now();
    await other.close(5000);
    expect(Date.now() - started).toBeLessThan(1500);
    // The stream ends (the rest of the buffered frames, then done).
    for await (const _ of frames) {
      // drain
    }
  });
});

describe('retry policy', () => {
  it('global: GET, PUT (partial), 400 naming the field and range with nothing changed, DELETE back to defaults', async () => {
    const initial = await call('GET', '/api/retry-policy');
    expect(initial.status).toBe(200);
    expect(initial.body.policy).toEqual(DEFAULT_RETRY_POLICY);

    const put = await call('PUT', '/api/retry-policy', { maxAttempts: 6, initialDelayMs: 250 });
    expect(put.status).toBe(200);
    expect(put.body).toEqual({
      policy: { ...DEFAULT_RETRY_POLICY, maxAttempts: 6, initialDelayMs: 250 },
      source: 'global',
    });
    expect((await call('GET', '/api/retry-policy')).body).toEqual({ policy: put.body.policy, source: 'global' });

    const bad: Array<[unknown, string, RegExp]> = [
      [{ maxAttempts: 0 }, 'maxAttempts', /1 to 100/],
      [{ maxAttempts: 2.5 }, 'maxAttempts', /integer/],
      [{ initialDelayMs: -1 }, 'initialDelayMs', /0 to 3600000/],
      [{ multiplier: 11 }, 'multiplier', /1 to 10/],
      [{ maxDelayMs: 100 }, 'maxDelayMs', /at least initialDelayMs/],
      [{ jitter: 'lots' }, 'jitter', /none/],
      [{ retryOn: ['nope'] }, 'retryOn', /must be one of/],
      [{ enabled: 'yes' }, 'enabled', /true or false/],
      [{ bogus: 1 }, 'bogus', /unknown field/],
      [[1], 'policy', /object/],
      [{ maxAttempts: 3, multiplier: 0 }, 'multiplier', /1 to 10/],
    ];
    for (const [body, field, message] of bad) {
      const r = await call('PUT', '/api/retry-policy', body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      const issue = r.body.issues.find((i: { field: string }) => i.field === field);
      expect(issue, JSON.stringify(r.body)).toBeDefined();
      expect(issue.message).toMatch(message);
    }
    expect((await call('GET', '/api/retry-policy')).body.policy).toEqual(put.body.policy);

    const reset = await call('DELETE', '/api/retry-policy');
    expect(reset.status).toBe(200);
    expect(reset.body).toEqual({ policy: DEFAULT_RETRY_POLICY, source: 'default' });
  });

  it('per session: GET (the global one until set), PUT, DELETE (follows the global one again)', async () => {
    const id = await createSession('text');
    await turnEnded(h.runtime, id);
    expect(['global', 'default']).toContain((await call('GET', `/api/sessions/${id}/retry-policy`)).body.source);
    const put = await call('PUT', `/api/sessions/${id}/retry-policy`, { maxAttempts: 2, retryOn: ['server_error'] });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ source: 'session', policy: { maxAttempts: 2, retryOn: ['server_error'] } });
    expect((await call('GET', `/api/sessions/${id}/retry-policy`)).body).toEqual(put.body);
    const bad = await call('PUT', `/api/sessions/${id}/retry-policy`, { maxAttempts: 101 });
    expect(bad.status).toBe(400);
    expect(bad.body.issues[0]).toMatchObject({ field: 'maxAttempts' });
    expect((await call('GET', `/api/sessions/${id}/retry-policy`)).body).toEqual(put.body);
    const reset = await call('DELETE', `/api/sessions/${id}/retry-policy`);
    expect(reset.status).toBe(200);
    expect(reset.body.source).not.toBe('session');
    expect((await call('GET', `/api/sessions/${id}`)).body.policySource).toBe('global');
  });

  it('a retry shows in the attempts with its category and backoff delay', async () => {
    model.setScript('flaky', [{ status: 500 }, { text: DEFAULT_TEXT }]);
    const id = await createSession('flaky', { retryPolicy: { initialDelayMs: 200, maxDelayMs: 1000, jitter: 'none' } });
    await turnEnded(h.runtime, id);
    const got = await call('GET', `/api/sessions/${id}`);
    expect(got.body.state).toBe('completed');
    expect(got.body.turn.attempts).toEqual([
      expect.objectContaining({ attempt: 1, outcome: 'failed', category: 'server_error', delayMs: 200 }),
      expect.objectContaining({ attempt: 2, outcome: 'completed' }),
    ]);
  });
});

describe('operations', () => {
  it('/healthz, /readyz with a worker, and /api/chart', async () => {
    expect(await call('GET', '/healthz')).toMatchObject({ status: 200, body: { status: 'ok' } });
    const ready = await call('GET', '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body).toMatchObject({ status: 'ready', workers: 1 });
    // The worker's sandbox, with what its mode cannot stop (the suites run with SESSIOND_SANDBOX=none).
    expect(ready.body.sandbox).toEqual([
      expect.objectContaining({
        mode: 'none',
        refused: false,
        gaps: expect.arrayContaining([expect.stringContaining('/proc/<pid>/environ')]),
      }),
    ]);
    const chart = await call('GET', '/api/chart');
    expect(chart.body.initial).toBe('idle');
    expect(chart.body.states.map((s: { name: string }) => s.name)).toEqual(
      expect.arrayContaining(['idle', 'running', 'backoff', 'cancelling', 'completed', 'failed', 'cancelled']),
    );
  });

  it('GET /api/workers: each heartbeat, live or stale, with what the worker offers', async () => {
    const { redis: store, keys } = internals(h.runtime);
    const stale = { id: 'gone-worker', host: 'elsewhere', pid: 4242, lastSeen: Date.now() - 60_000, active: 0 };
    await store.hset(keys.workers, stale.id, JSON.stringify(stale));
    try {
      const r = await call('GET', '/api/workers');
      expect(r.status).toBe(200);
      expect(r.body.live).toBe(1);
      expect(r.body.staleAfterMs).toBeGreaterThan(0);
      expect(r.body.workers).toHaveLength(2);
      expect(r.body.workers[0]).toMatchObject({ live: true, agents: expect.arrayContaining(['pi']) });
      expect(r.body.workers[1]).toEqual({ ...stale, live: false });
    } finally {
      await store.hdel(keys.workers, stale.id);
    }
  });

  it('/readyz is 503 with the reason: no worker seen; Redis unreachable', async () => {
    const { connect, closeAll } = connector(redis.url);
    const lonely = new Runtime({ connect, prefix: uniquePrefix('no-workers') });
    const app = createApp({
      client: clientOver(lonely),
      config,
      logger: captureLogger(),
      dashboard: false,
      bullBoard: false,
    });
    const r = await app.request('/readyz');
    expect(r.status).toBe(503);
    expect(await r.json()).toMatchObject({ status: 'unready', reason: 'no worker has ever sent a heartbeat' });
    await lonely.close();
    closeAll();

    const doomed = await startRedis();
    const down = connector(doomed.url);
    const gone = new Runtime({ connect: down.connect, prefix: uniquePrefix('down') });
    const app2 = createApp({
      client: clientOver(gone),
      config,
      logger: captureLogger(),
      dashboard: false,
      bullBoard: false,
    });
    await doomed.stop();
    const r2 = await app2.request('/readyz');
    expect(r2.status).toBe(503);
    expect(((await r2.json()) as { reason: string }).reason).toMatch(/Redis/);
    down.closeAll();
  });

  it('/metrics: Prometheus text with every metric after turns ran (completed, retried, cancelled)', async () => {
    // The sessions of the tests above: completed turns, a retried one, a cancelled one.
    const r = await fetch(`${server.url}/metrics`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await r.text();
    for (const name of [
      'sessiond_sessions',
      'sessiond_attempts_total',
      'sessiond_retries_total',
      'sessiond_turn_duration_seconds',
      'sessiond_cancel_latency_seconds',
      'sessiond_queue_jobs',
      'sessiond_workers',
    ]) {
      expect(text).toContain(`# TYPE ${name} `);
    }
    const value = (pattern: RegExp): number => Number(pattern.exec(text)?.[1] ?? NaN);
    expect(value(/^sessiond_sessions\{state="completed"\} (\d+)/m)).toBeGreaterThanOrEqual(3);
    expect(value(/^sessiond_sessions\{state="cancelled"\} (\d+)/m)).toBeGreaterThanOrEqual(1);
    expect(value(/^sessiond_attempts_total\{outcome="completed",category="none"\} (\d+)/m)).toBeGreaterThanOrEqual(3);
    expect(value(/^sessiond_attempts_total\{outcome="failed",category="server_error"\} (\d+)/m)).toBeGreaterThanOrEqual(
      1,
    );
    expect(value(/^sessiond_retries_total\{category="server_error"\} (\d+)/m)).toBeGreaterThanOrEqual(1);
    expect(value(/^sessiond_turn_duration_seconds_count\{status="completed"\} (\d+)/m)).toBeGreaterThanOrEqual(3);
    expect(value(/^sessiond_turn_duration_seconds_count\{status="cancelled"\} (\d+)/m)).toBeGreaterThanOrEqual(1);
    expect(value(/^sessiond_cancel_latency_seconds_count (\d+)/m)).toBeGreaterThanOrEqual(1);
    expect(value(/^sessiond_queue_jobs\{state="waiting"\} (\d+)/m)).toBeGreaterThanOrEqual(0);
    expect(value(/^sessiond_workers (\d+)/m)).toBe(1);
    // The whenBusy test above: one interrupting prompt that stopped a running turn; its rejected one is not counted.
    expect(value(/^sessiond_prompts_when_busy_total\{strategy="interrupt",effect="interrupted"\} (\d+)/m)).toBe(1);
    expect(text).not.toContain('strategy="reject"');
  });
});

describe('OpenAPI', () => {
  const doc = openApiDocument() as {
    openapi: string;
    paths: Record<
      string,
      Record<
        string,
        {
          operationId: string;
          requestBody?: { content: Record<string, { examples?: Record<string, { value: unknown }> }> };
        }
      >
    >;
    components: { schemas: Record<string, unknown> };
  };

  it('every route the app serves is in the document, and every documented operation is served', () => {
    const app = createApp({ client: clientOver(h.runtime), config, logger: captureLogger() });
    const served = new Set(
      app.routes
        .filter((r) => r.method !== 'ALL' && !r.path.startsWith('/queues'))
        .map((r) => `${r.method} ${r.path.replace(/:([A-Za-z]+)/g, '{$1}')}`),
    );
    const documented = new Set(
      Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`)),
    );
    expect([...served].sort()).toEqual([...documented].sort());
    // Bull Board is mounted (its own UI and API, outside this document).
    expect(app.routes.some((r) => r.path.startsWith('/queues'))).toBe(true);
  });

  it('every API path with a session id answers 404 naming an id that cannot be one, before reading its query or body', async () => {
    const withId = Object.entries(doc.paths)
      .filter(([path]) => path.startsWith('/api/') && path.includes('{id}'))
      .flatMap(([path, ops]) => Object.keys(ops).map((method) => ({ method: method.toUpperCase(), path })));
    expect(withId.length).toBeGreaterThanOrEqual(15);
    for (const { method, path } of withId) {
      const target = `${path.replace('{id}', 'no%20such%20id').replace(/\{[A-Za-z]+\}/g, 'x')}?from=nope&force=maybe`;
      const r = await call(method, target, method === 'GET' || method === 'DELETE' ? undefined : { unexpected: true });
      expect({ route: `${method} ${path}`, status: r.status, body: r.body }).toEqual({
        route: `${method} ${path}`,
        status: 404,
        body: { error: 'unknown session "no such id"', code: 'not_found' },
      });
    }
    // The dashboard's page of a session renders any id (it says when a session is unknown).
    expect((await fetch(`${server.url}/sessions/no%20such%20id`)).status).toBe(200);
  });

  it('is OpenAPI 3.1, every $ref resolves, and it is served at /openapi.json', async () => {
    expect(doc.openapi).toBe('3.1.0');
    const refs = JSON.stringify(doc).match(/"#\/components\/schemas\/[^"]+"/g) ?? [];
    for (const ref of refs) expect(doc.components.schemas, ref).toHaveProperty(ref.slice(22, -1));
    expect((await call('GET', '/openapi.json')).body).toEqual(JSON.parse(JSON.stringify(doc)));
  });

  it('the example requests validate, and the API accepts them', async () => {
    const schemas: Record<string, (value: unknown) => boolean> = {
      createSession: (v) => CreateSessionBody.safeParse(v).success,
      addPrompt: (v) => PromptBody.safeParse(v).success,
      cancelSession: (v) => CancelBody.safeParse(v).success,
      putRetryPolicy: (v) => mergeRetryPolicy(DEFAULT_RETRY_POLICY, v).ok,
      putSessionRetryPolicy: (v) => mergeRetryPolicy(DEFAULT_RETRY_POLICY, v).ok,
      login: (v) => LoginBody.safeParse(v).success,
      pauseDispatch: (v) => DispatchBody.safeParse(v).success,
      resumeDispatch: (v) => DispatchBody.safeParse(v).success,
      replayWebhooks: (v) => ReplayBody.safeParse(v).success,
      decideApproval: (v) => ApprovalBody.safeParse(v).success,
      undoTurn: (v) => UndoBody.safeParse(v).success,
      forkSession: (v) => ForkBody.safeParse(v).success,
      // The `hourly` example prompts `build-42`, the session createSession's `full` example made just before.
      createSchedule: (v) => ScheduleRequestSchema.safeParse(v).success,
    };
    // Each approval example answers a request of its own, waiting as an attempt in ask mode stores it.
    let seeded = 0;
    const seedOne = (sessionId: string): Promise<string> =>
      seedApproval(h.runtime, sessionId, `t1-0123456789ab-${++seeded}`);
    const withBodies = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.entries(ops)
        .filter(([, op]) => op.requestBody !== undefined)
        .map(([method, op]) => ({ path, method, op })),
    );
    expect(withBodies.map((x) => x.op.operationId).sort()).toEqual(Object.keys(REQUEST_EXAMPLES).sort());

    const id = await createSession('text');
    await turnEnded(h.runtime, id);
    for (const { path, method, op } of withBodies) {
      const examples = op.requestBody?.content['application/json']?.examples ?? {};
      expect(Object.keys(examples).length, op.operationId).toBeGreaterThan(0);
      for (const [name, example] of Object.entries(examples)) {
        expect(schemas[op.operationId]?.(example.value), `${op.operationId}/${name}`).toBe(true);
        const target = path.replace('{id}', id);
        const r = await call(
          method.toUpperCase(),
          target.includes('{requestId}') ? target.replace('{requestId}', await seedOne(id)) : target,
          example.value,
        );
        // This session has no workspace (no worker with workspaces here): the body was accepted, the session refused.
        // test/runtime/workspaces-turns.test.ts sends the same bodies to a workspace session.
        if (op.operationId === 'undoTurn' || op.operationId === 'forkSession') {
          expect({ status: r.status, error: r.body.error }, `${op.operationId}/${name}`).toEqual({
            status: 409,
            error: `session "${id}" has no workspace (it runs in a caller's cwd, or no worker with workspaces has run it yet)`,
          });
          continue;
        }
        expect(r.status, `${op.operationId}/${name}: ${JSON.stringify(r.body)}`).toBeGreaterThanOrEqual(200);
        expect(r.status, `${op.operationId}/${name}: ${JSON.stringify(r.body)}`).toBeLessThan(300);
        if (op.operationId === 'createSession') {
          // Example bodies name no model the fake server knows of: stop them rather than wait on their retries.
          await h.runtime.cancel(r.body.sessionId as string);
          await turnEnded(h.runtime, r.body.sessionId as string, r.body.turn as number);
        }
        if (op.operationId === 'addPrompt') await turnEnded(h.runtime, id, r.body.turn as number);
      }
    }
    await call('DELETE', '/api/retry-policy');
  });
});

describe('auth and request guards', () => {
  it('refuses to bind anywhere but loopback without a token', async () => {
    await expect(
      startServer({ client: clientOver(h.runtime), config, logger: captureLogger(), host: '0.0.0.0', port: 0 }),
    ).rejects.toThrow(/without an API token/);
    expect(() =>
      createApp({
        client: clientOver(h.runtime),
        config: { ...config, http: { ...config.http, host: '0.0.0.0' } },
        logger: captureLogger(),
      }),
    ).toThrow(/SESSIOND_API_TOKEN/);
  });

  it('a token configured on loopback is enforced too, reads included (route × scope matrix: auth.test.ts)', async () => {
    const app = createApp({
      client: clientOver(h.runtime),
      config: { ...config, http: { ...config.http, token: TOKEN } },
      logger: captureLogger(),
      bullBoard: false,
    });
    expect((await app.request('/api/retry-policy', { method: 'DELETE' })).status).toBe(401);
    expect((await app.request('/api/sessions')).status).toBe(401);
    expect((await app.request('/api/sessions', { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(200);
    expect(
      (await app.request('/api/retry-policy', { method: 'DELETE', headers: { authorization: `Bearer ${TOKEN}` } }))
        .status,
    ).toBe(200);
  });

  it('cross-origin writes are refused (403); on loopback, a foreign Host (DNS rebinding) is refused (421)', async () => {
    const cross = await call('PUT', '/api/retry-policy', { maxAttempts: 9 }, { origin: 'http://evil.example' });
    expect(cross.status).toBe(403);
    const nullOrigin = await call('PUT', '/api/retry-policy', { maxAttempts: 9 }, { origin: 'null' });
    expect(nullOrigin.status).toBe(403);
    expect((await h.runtime.getPolicy()).policy.maxAttempts).toBe(DEFAULT_RETRY_POLICY.maxAttempts);
    const same = await call('PUT', '/api/retry-policy', { maxAttempts: 4 }, { origin: server.url });
    expect(same.status).toBe(200);
    await call('DELETE', '/api/retry-policy');

    const app = createApp({ client: clientOver(h.runtime), config, logger: captureLogger(), bullBoard: false });
    const rebound = await app.request('http://evil.example/api/sessions', { headers: { host: 'evil.example' } });
    expect(rebound.status).toBe(421);
    const local = await app.request('http://localhost:7420/healthz', { headers: { host: 'localhost:7420' } });
    expect(local.status).toBe(200);
  });

  it('logs one line per request: method, path, status, ms — no bodies, no query strings', async () => {
    logLines.length = 0;
    await call('POST', '/api/sessions', { prompt: 'secret prompt text', sessionId: 'bad id!' });
    await call('GET', '/api/sessions?state=completed');
    const lines = logLines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'request');
    expect(lines).toEqual([
      expect.objectContaining({ method: 'POST', path: '/api/sessions', status: 400, ms: expect.any(Number) }),
      expect.objectContaining({ method: 'GET', path: '/api/sessions', status: 200, ms: expect.any(Number) }),
    ]);
    expect(logLines.join('\n')).not.toContain('secret prompt text');
    expect(logLines.join('\n')).not.toContain('state=completed');
  });
});
