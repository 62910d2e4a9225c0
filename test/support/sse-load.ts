import { readFileSync } from 'node:fs';
import { execa } from 'execa';
import type { Redis } from 'ioredis';
import { asMessage, readSse } from '../interfaces/http/sse-client.ts';
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';
import { REPO_ROOT } from './pi-env.ts';

const HEAP_PROBE = pathToFileURL(join(REPO_ROOT, 'test', 'support', 'heap-probe.mjs')).href;
import type { Harness } from './runtime.ts';

/**
 * Many concurrent SSE clients against one `sessiond serve` process (the bin given,
 * so an older checkout can be measured the same way): Redis connections and the
 * process's RSS with no stream, with every stream open, and after they left; one
 * more client past the cap; and whether each client got every message of a live
 * turn, in order. Traffic goes only to 127.0.0.1.
 */

export interface StreamLoadOptions {
  h: Harness;
  redisUrl: string;
  /** `bin/sessiond.mjs` of the checkout to measure. */
  bin: string;
  clients: number;
  /** SESSIOND_MAX_STREAMS for serve (unset: its default). */
  maxStreams?: number;
  /** pi turn options (a fake model's id and cwd): a quick first turn, then the live one with `liveModel`. */
  options: Record<string, unknown>;
  liveModel: string;
  /** A redis client to count connections with (`CLIENT LIST`). */
  admin: Redis;
  /** Rounds of `clients` streams, one after the other, each for a live turn of its own (default 1). */
  rounds?: number;
}

export interface RoundReport {
  redisClients: { streaming: number; after: number };
  rssMiB: { streaming: number; peak: number; after: number };
  /** V8 heap in use after a full GC, with the streams open and after they left. */
  heapMiB: { streaming: number; after: number };
  /** Status of the one client past `clients` (when maxStreams was set). */
  overCap: { status: number; retryAfter: string | null } | null;
  /** Clients that received exactly the stored messages of the live turn, in order. */
  complete: number;
  liveMessages: number;
}

export interface StreamLoadReport {
  clients: number;
  idle: { redisClients: number; rssMiB: number; heapMiB: number };
  rounds: RoundReport[];
}

function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m === null ? Number.NaN : Math.round(Number(m[1]) / 102.4) / 10;
}

/** The measured process's heap after a full GC (heap-probe.mjs), MiB. */
type HeapReader = () => Promise<number>;

function heapReader(child: { pid?: number | undefined; stderr: NodeJS.ReadableStream | null }): HeapReader {
  let waiting: ((mib: number) => void) | null = null;
  let buffer = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    buffer += chunk.toString('utf8');
    let nl: number;
    while ((nl = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      const m = /^sessiond-heap (.*)$/.exec(line);
      if (m !== null && waiting !== null) {
        const w = waiting;
        waiting = null;
        w(Math.round((JSON.parse(m[1] as string) as { heapUsed: number }).heapUsed / 104857.6) / 10);
      }
    }
  });
  return () =>
    new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no heap line from serve within 10 s')), 10_000);
      waiting = (mib) => {
        clearTimeout(timer);
        resolve(mib);
      };
      process.kill(child.pid as number, 'SIGUSR2');
    });
}

async function clientCount(admin: Redis): Promise<number> {
  return ((await admin.client('LIST')) as string).split('\n').filter((l) => l.trim() !== '').length;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until<T>(
  probe: () => Promise<T | null | undefined | false> | T | null | undefined | false,
  ms: number,
  what: string,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== null && value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(100);
  }
}

export async function runStreamLoad(o: StreamLoadOptions): Promise<StreamLoadReport> {
  const child = execa(process.execPath, ['--expose-gc', '--import', HEAP_PROBE, o.bin, 'serve', '--port', '0'], {
    reject: false,
    cwd: REPO_ROOT,
    stdin: 'ignore',
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: process.env.HOME ?? '/tmp',
      REDIS_URL: o.redisUrl,
      SESSIOND_PREFIX: o.h.prefix,
      SESSIOND_LOG_LEVEL: 'warn',
      ...(o.maxStreams === undefined ? {} : { SESSIOND_MAX_STREAMS: String(o.maxStreams) }),
    },
    extendEnv: false,
    timeout: 300_000,
  });
  const controllers: AbortController[] = [];
  try {
    const url = await new Promise<string>((resolve, reject) => {
      let seen = '';
      child.stderr?.on('data', (chunk: Buffer) => {
        seen += chunk.toString('utf8');
        const match = /serving (http:\/\/127\.0\.0\.1:\d+)/.exec(seen);
        if (match?.[1] !== undefined) resolve(match[1]);
      });
      void child.then(() => reject(new Error(`serve exited early:\n${seen}`)));
    });
    const pid = child.pid as number;
    const heap = heapReader(child);

    const first = await o.h.runtime.enqueue({ prompt: 'first', options: o.options });
    const id = first.sessionId;
    await until(
      async () => (await o.h.runtime.getSession(id))?.context?.turn?.status === 'completed',
      60_000,
      'turn 1',
    );
    await sleep(500);
    const idle = { redisClients: await clientCount(o.admin), rssMiB: rssMiB(pid), heapMiB: await heap() };
    const rounds: RoundReport[] = [];
    for (let round = 0; round < (o.rounds ?? 1); round += 1)
      rounds.push(await oneRound(o, url, pid, heap, id, round + 2, idle.redisClients, controllers));
    return { clients: o.clients, idle, rounds };
  } finally {
    for (const c of controllers) c.abort();
    child.kill('SIGTERM');
    await child;
  }
}

/** `clients` streams open on session `id`; then a live turn `turn`; every client checked; all leave. */
async function oneRound(
  o: StreamLoadOptions,
  url: string,
  pid: number,
  heap: HeapReader,
  id: string,
  turn: number,
  idleClients: number,
  controllers: AbortController[],
): Promise<RoundReport> {
  const from = (await o.h.runtime.readMessages(id)).length + 1;
  let open = 0;
  const mine: AbortController[] = [];
  const received: number[][] = Array.from({ length: o.clients }, () => []);
  const done = Array.from({ length: o.clients }, (_, i) => {
    const controller = new AbortController();
    controllers.push(controller);
    mine.push(controller);
    return (async () => {
      const r = await fetch(`${url}/api/sessions/${id}/events?from=${from}`, { signal: controller.signal });
      if (r.status !== 200) throw new Error(`client ${i}: HTTP ${r.status}`);
      open += 1;
      for await (const frame of readSse(r)) {
        const m = asMessage(frame);
        if (m === null) continue;
        received[i]?.push(m.message.seq);
        if (m.event.startsWith('terminal.')) break;
      }
    })().catch((error: Error) => {
      if (error.name !== 'AbortError') throw error;
    });
  });
  await until(() => open === o.clients, 120_000, `${o.clients} streams to open (${open} so far)`);
  await sleep(1000);
  const streaming = { clients: await clientCount(o.admin), rss: rssMiB(pid), heap: await heap() };

  let overCap: RoundReport['overCap'] = null;
  if (o.maxStreams !== undefined) {
    const extra = new AbortController();
    controllers.push(extra);
    const r = await fetch(`${url}/api/sessions/${id}/events?from=${from}`, { signal: extra.signal });
    overCap = { status: r.status, retryAfter: r.headers.get('retry-after') };
    await r.body?.cancel().catch(() => undefined);
    extra.abort();
  }

  let peak = streaming.rss;
  const sampler = setInterval(() => {
    peak = Math.max(peak, rssMiB(pid));
  }, 200);
  await o.h.runtime.enqueue({ sessionId: id, prompt: `live ${turn}`, options: { ...o.options, model: o.liveModel } });
  const results = await Promise.race([Promise.all(done), sleep(180_000).then(() => 'timeout' as const)]);
  clearInterval(sampler);
  if (results === 'timeout') throw new Error('the clients did not all see the live turn end within 180 s');
  const stored = (await o.h.runtime.readMessages(id, from)).map((m) => m.seq);
  const complete = received.filter(
    (seqs) => seqs.length === stored.length && seqs.every((s, i) => s === stored[i]),
  ).length;

  for (const c of mine) c.abort();
  await until(
    async () => (await clientCount(o.admin)) <= idleClients + 1,
    30_000,
    'the Redis connections of the streams to close',
  ).catch(() => undefined);
  await sleep(3000);
  return {
    redisClients: { streaming: streaming.clients, after: await clientCount(o.admin) },
    rssMiB: { streaming: streaming.rss, peak, after: rssMiB(pid) },
    heapMiB: { streaming: streaming.heap, after: await heap() },
    overCap,
    complete,
    liveMessages: stored.length,
  };
}
