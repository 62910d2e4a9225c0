import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig, type Config } from '../../../src/config/config.ts';
import { startServer, type RunningServer } from '../../../src/interfaces/http/server.ts';
import { MessageHub } from '../../../src/runtime/message-hub.ts';
import type { StoredMessage } from '../../../src/runtime/store/session-store.ts';
import { type PiEnv } from '../../support/pi-env.ts';
import { until, useRuntimeSuite, type Harness } from '../../support/runtime.ts';
import { asMessage, readSse } from './sse-client.ts';
import { internals } from '../../../src/runtime/internals.ts';
import { clientOver } from '../../../src/api/bind.ts';

/**
 * Bounded event streams: one shared Redis reader per server, a cap on
 * concurrent streams, an idle limit, validated Last-Event-ID (500 concurrent
 * clients against one `sessiond serve` process: sse-load.test.ts).
 */

const SLOW = Array.from({ length: 40 }, (_, i) => (i === 0 ? 's0' : ` s${i}`));
const READ_TOKEN = 'read-token-0123456789abcdef';
const LIVE = Array.from({ length: 30 }, (_, i) => (i === 0 ? 'w0' : ` w${i}`));

let env: PiEnv;
let h: Harness;
const servers: RunningServer[] = [];
useRuntimeSuite(
  'http-streams',
  {
    scripts: { 'live-text': { text: LIVE, chunkDelayMs: 50 }, 'slow-live': { text: SLOW, chunkDelayMs: 100 } },
    cleanup: () => Promise.all(servers.map((s) => s.close(500))).then(() => undefined),
  },
  async (s) => {
    ({ env, h } = s);
    await h.startWorker();
  },
);

function configFor(http: Record<string, unknown>): Config {
  const base = loadConfig({ prefix: h.prefix }, {});
  return { ...base, http: { ...base.http, ...http } as Config['http'] };
}

async function serve(http: Record<string, unknown>, keepAliveMs = 200): Promise<RunningServer> {
  const server = await startServer({
    client: clientOver(h.runtime),
    config: configFor(http),
    logger: pino({ level: 'silent' }),
    port: 0,
    keepAliveMs,
    bullBoard: false,
  });
  servers.push(server);
  return server;
}

const opts = (model: string) => ({ provider: 'fake', model, cwd: env.cwd });

async function finishedSession(): Promise<string> {
  const { sessionId } = await h.runtime.enqueue({ prompt: 'hello', options: opts('text') });
  await until(
    async () => ((await h.runtime.getSession(sessionId))?.context?.turn?.status === 'completed' ? true : null),
    60_000,
    'turn 1',
  );
  return sessionId;
}

describe('stream limits', () => {
  it('over http.maxStreams: 503 with Retry-After; once a stream ends, a new one is let in', async () => {
    const server = await serve({ maxStreams: 2 });
    const id = await finishedSession();
    const controllers = [new AbortController(), new AbortController()];
    const open = await Promise.all(
      controllers.map((c) => fetch(`${server.url}/api/sessions/${id}/events`, { signal: c.signal })),
    );
    expect(open.map((r) => r.status)).toEqual([200, 200]);
    const over = await fetch(`${server.url}/api/sessions/${id}/events`);
    expect(over.status).toBe(503);
    expect(over.headers.get('retry-after')).toBe('5');
    expect(await over.json()).toMatchObject({ error: expect.stringMatching(/too many live event streams/) });
    controllers[0]?.abort();
    const again = await until(
      async () => {
        const r = await fetch(`${server.url}/api/sessions/${id}/events`);
        if (r.status === 200) return r;
        await r.body?.cancel();
        return null;
      },
      10_000,
      'a slot to free up',
    );
    await again.body?.cancel();
    controllers[1]?.abort();
  });

  it('a stream that sends no message for http.streamIdleTimeout is closed by the server (keep-alives do not count)', async () => {
    const server = await serve({ streamIdleTimeout: 1000 });
    const id = await finishedSession();
    const r = await fetch(`${server.url}/api/sessions/${id}/events`);
    let messages = 0;
    let keepAlives = 0;
    const ended = (async () => {
      for await (const frame of readSse(r)) {
        if (asMessage(frame) !== null) messages += 1;
        if (frame.comment === 'keep-alive') keepAlives += 1;
      }
      return true;
    })();
    expect(await Promise.race([ended, new Promise((resolve) => setTimeout(() => resolve(false), 15_000))])).toBe(true);
    expect(messages).toBe((await h.runtime.readMessages(id)).length);
    expect(keepAlives).toBeGreaterThan(0);
  });

  it('a bad Last-Event-ID is a 400 naming it, like a bad ?from=', async () => {
    const server = await serve({});
    const id = await finishedSession();
    for (const bad of ['abc', '-1', '1.5', '1e5', '99999999999999999999', '9007199254740993']) {
      const r = await fetch(`${server.url}/api/sessions/${id}/events`, { headers: { 'Last-Event-ID': bad } });
      expect(r.status, bad).toBe(400);
      expect(await r.json()).toMatchObject({ issues: [{ field: 'Last-Event-ID' }] });
    }
    const from = await fetch(`${server.url}/api/sessions/${id}/events?from=abc`);
    expect(from.status).toBe(400);
    expect(await from.json()).toMatchObject({ issues: [{ field: 'from' }] });
  });
});

describe('MessageHub', () => {
  const key = (id: string) => `${h.prefix}:hub-test:${id}`;
  const add = (r: Redis, id: string, seq: number) =>
    r.xadd(
      key(id),
      `${seq}-0`,
      'seq',
      String(seq),
      'turn',
      '1',
      'attempt',
      '1',
      'type',
      'assistant',
      'content',
      JSON.stringify({ text: `m${seq}` }),
    );

  async function take(gen: AsyncGenerator<StoredMessage>, n: number): Promise<number[]> {
    const seqs: number[] = [];
    for await (const m of gen) {
      seqs.push(m.seq);
      if (seqs.length === n) break;
    }
    return seqs;
  }

  it('fans out several sessions over one reader: history then live, no gap, no duplicate; a follower that falls behind is ended, the others go on', async () => {
    const writer = h.connect('hub-writer');
    const hub = new MessageHub({
      connect: () => h.connect('hub-reader'),
      redis: internals(h.runtime).redis,
      logKey: key,
      maxQueued: 5,
    });
    try {
      for (let seq = 1; seq <= 3; seq += 1) await add(writer, 'a', seq);
      const stop = new AbortController();
      const a1 = take(hub.follow('a', 1, stop.signal), 10);
      const a2 = take(hub.follow('a', 3, stop.signal), 8);
      const b = take(hub.follow('b', 1, stop.signal), 4);
      // The slow one takes one live message, then no more while ten others arrive.
      const slow = hub.follow('a', 4, stop.signal);
      const firstOfSlow = slow.next();
      await until(async () => hub.followers === 4 || null, 5000, 'four followers');
      for (let seq = 4; seq <= 10; seq += 1) await add(writer, 'a', seq);
      for (let seq = 1; seq <= 4; seq += 1) await add(writer, 'b', seq);
      expect(await a1).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      expect(await a2).toEqual([3, 4, 5, 6, 7, 8, 9, 10]);
      expect(await b).toEqual([1, 2, 3, 4]);
      expect((await firstOfSlow).value?.seq).toBe(4);
      // More arrive while the slow one still has 6 (> maxQueued 5) untaken: the hub ends it.
      const a3 = take(hub.follow('a', 11, stop.signal), 4);
      await until(async () => hub.followers === 2 || null, 5000, 'the slow follower and a3');
      for (let seq = 11; seq <= 14; seq += 1) await add(writer, 'a', seq);
      expect(await a3).toEqual([11, 12, 13, 14]);
      const rest: number[] = [];
      for await (const m of slow) rest.push(m.seq);
      expect(rest).toEqual([]); // its stream ended; a client resumes from its last seq (4)
      stop.abort();
      await until(async () => hub.followers === 0 || null, 5000, 'the followers to leave');
      const list = (await internals(h.runtime).redis.client('LIST')) as string;
      expect(list.split('\n').filter((l) => l.includes('name=test:hub-reader'))).toHaveLength(1);
    } finally {
      await hub.close();
      writer.disconnect();
    }
  });

  it('a follower that joins while the reader is blocked past the seq it wants still gets every message (none skipped)', async () => {
    const writer = h.connect('hub-writer-2');
    const hub = new MessageHub({
      connect: () => h.connect('hub-reader-2'),
      redis: internals(h.runtime).redis,
      logKey: key,
    });
    try {
      for (let seq = 1; seq <= 48; seq += 1) await add(writer, 'c', seq);
      const stop = new AbortController();
      const x = hub.follow('c', 1, stop.signal);
      for (let n = 0; n < 48; n += 1) await x.next();
      // y reads its history (1..48) in one page and stops after the first message, before joining.
      const y = hub.follow('c', 1, stop.signal);
      expect((await y.next()).value?.seq).toBe(1);
      const xGot49 = x.next();
      await add(writer, 'c', 49);
      expect((await xGot49).value?.seq).toBe(49);
      await new Promise((resolve) => setTimeout(resolve, 200)); // the reader is blocked again, from 49 on, for x
      const ySeqs: number[] = [];
      for (let n = 0; n < 47; n += 1) ySeqs.push((await y.next()).value?.seq ?? -1); // 2..48 from its page; then it joins wanting 49
      const yNext = y.next();
      await add(writer, 'c', 50);
      ySeqs.push((await yNext).value?.seq ?? -1);
      ySeqs.push((await y.next()).value?.seq ?? -1);
      expect(ySeqs).toEqual(Array.from({ length: 49 }, (_, i) => i + 2));
      expect((await x.next()).value?.seq).toBe(50);
      stop.abort();
    } finally {
      await hub.close();
      writer.disconnect();
    }
  });
});

describe('stream tickets (EventSource cannot send headers)', () => {
  const tokens = [{ name: 'viewer', scope: 'read', sha256: createHash('sha256').update(READ_TOKEN).digest('hex') }];

  async function ticketFor(
    server: RunningServer,
    id: string,
  ): Promise<{ ticket: string; expiresAt: number; url: string }> {
    const r = await fetch(`${server.url}/api/sessions/${id}/stream-ticket`, {
      method: 'POST',
      headers: { authorization: `Bearer ${READ_TOKEN}` },
    });
    expect(r.status).toBe(200);
    return (await r.json()) as { ticket: string; expiresAt: number; url: string };
  }

  it('a ticket from a read token opens the stream; reconnects with Last-Event-ID work until it expires; then a new ticket resumes with no message lost', async () => {
    const server = await serve({ tokens, streamTicketTtl: 1000 });
    const { sessionId: id } = await h.runtime.enqueue({ prompt: 'long', options: opts('slow-live') });
    const got: number[] = [];
    let tickets = 0;
    let cutByExpiry = 0;
    let finished = false;
    const deadline = Date.now() + 60_000;
    while (!finished && Date.now() < deadline) {
      const { url, expiresAt } = await ticketFor(server, id);
      tickets += 1;
      // Within one ticket: a reconnect with Last-Event-ID (as EventSource does) resumes after it.
      for (let attempt = 0; attempt < 2 && !finished; attempt += 1) {
        const controller = new AbortController();
        const headers: Record<string, string> = got.length === 0 ? {} : { 'Last-Event-ID': String(got.at(-1)) };
        const r = await fetch(`${server.url}${url}`, { headers, signal: controller.signal });
        if (r.status === 401) {
          expect(Date.now()).toBeGreaterThanOrEqual(expiresAt);
          expect(await r.json()).toMatchObject({ error: expect.stringMatching(/expired/) });
          break;
        }
        expect(r.status).toBe(200);
        let taken = 0;
        for await (const frame of readSse(r)) {
          const m = asMessage(frame);
          if (m === null) continue;
          got.push(m.message.seq);
          taken += 1;
          if (m.event.startsWith('terminal.')) finished = true;
          // The first connection of a ticket leaves after two messages (a dropped connection).
          if (finished || (attempt === 0 && taken === 2)) break;
        }
        controller.abort();
        if (!finished && attempt === 1) cutByExpiry += 1; // the server ended it: the ticket expired
      }
    }
    expect(finished).toBe(true);
    expect(got).toEqual((await h.runtime.readMessages(id)).map((m) => m.seq));
    expect(tickets).toBeGreaterThan(1);
    expect(cutByExpiry).toBeGreaterThan(0);
  }, 90_000);

  it("a ticket opens only its own session's stream and nothing else; without one (or a token) the stream is 401", async () => {
    const server = await serve({ tokens });
    const one = await finishedSession();
    const other = await finishedSession();
    const { ticket } = await ticketFor(server, one);
    const own = await fetch(`${server.url}/api/sessions/${one}/events?ticket=${encodeURIComponent(ticket)}`);
    expect(own.status).toBe(200);
    await own.body?.cancel();
    expect(
      (await fetch(`${server.url}/api/sessions/${other}/events?ticket=${encodeURIComponent(ticket)}`)).status,
    ).toBe(401);
    expect((await fetch(`${server.url}/api/sessions/${one}?ticket=${encodeURIComponent(ticket)}`)).status).toBe(401);
    expect(
      (await fetch(`${server.url}/api/sessions/${one}/events?ticket=${encodeURIComponent(`${ticket.slice(0, -2)}xx`)}`))
        .status,
    ).toBe(401);
    expect((await fetch(`${server.url}/api/sessions/${one}/events`)).status).toBe(401);
    // Tickets are signed with http.secret when set: another server with the same secret accepts them.
    const a = await serve({ tokens, secret: 'shared-secret-shared-secret-0123456789' });
    const b = await serve({ tokens, secret: 'shared-secret-shared-secret-0123456789' });
    const fromA = await ticketFor(a, one);
    const onB = await fetch(`${b.url}${fromA.url}`);
    expect(onB.status).toBe(200);
    await onB.body?.cancel();
    expect((await fetch(`${server.url}${fromA.url}`)).status).toBe(401);
  });
});
