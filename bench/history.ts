import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { deploymentPolicy } from '../src/runtime/deployment-policy.ts';
import { createKeys } from '../src/runtime/keys.ts';
import { lifecycleKeys, SESSION_PARTS } from '../src/runtime/lifecycle/keys.ts';
import { sweep } from '../src/runtime/lifecycle/sweeper.ts';
import { createSessionQueue } from '../src/runtime/queue.ts';
import { Runtime } from '../src/runtime/runtime.ts';
import { SessionWorker, WORKER_DEFAULTS } from '../src/runtime/worker.ts';
import { startRedis } from '../test/support/redis.ts';
import { BenchFailure } from './support/benchmark.ts';
import { writeFakeAgents } from './support/fake-agents.ts';
import {
  bounded,
  buildCheckout,
  orNull,
  procCpuMs,
  procRssBytes,
  sleep,
  tempDir,
  type Cleanup,
} from './support/harness.ts';
import { median, round } from './support/timing.ts';
import { internals } from '../src/runtime/internals.ts';

/**
 * Does the idle cost of a deployment grow with its history? Two deployments alike (each one real
 * redis-server and one `sessiond serve` process, no worker, no work), one with SMALL and one with
 * LARGE stored finished sessions, up at the same time and measured side by side: the idle CPU over
 * the same window, the latencies interleaved request by request (the order alternating), so that a
 * load swing of this shared machine falls on both sides of a ratio alike. The sessions have the real stored shape: one session is run through a real
 * worker (the /bin/sh fake pi, a completed turn of MESSAGES messages), and its keys and index
 * entries are copied under new ids with pipelined writes (creating 100,000 sessions through the
 * queue would take most of an hour on 2 cores).
 *
 * Figures, each for SMALL and LARGE and as the ratio LARGE ÷ SMALL (target ≤ 1.2, flat):
 * `serve`'s CPU per second and redis-server's CPU per second over an idle window of WINDOW_S
 * (SETTLE_S after its first /metrics), `/metrics` (median of scrapes spaced past its 3 s cache, each a
 * refresh; the first of a fresh `serve` is shown too), `GET /api/sessions`
 * first page and 50th page (cursor; 100 per page), `serve`'s RSS over the idle window (the median of a sample a second). Latency ratios are the median of
 * REPEAT paired ratios. Beside each store, a bare redis-server of its size (bareRedis), idle over the
 * same window: the baseline of redis-server's idle CPU, what Redis itself takes with that much data.
 * Retention: on a redis-server of its own, INFO used_memory before RETAINED sessions are created
 * (after a warm-up that loads the scripts) and after the sweeper has expired them all (target ≤ 1.1).
 *
 * BENCH_HISTORY_COUNTS=20000 measures one count only (no ratios); BENCH_HISTORY_SERVE_ROOT=DIR runs
 * `serve` from another checkout (e.g. an older commit, for a before/after comparison; the 50th page
 * needs the cursor, which older builds do not have).
 */
export const name = 'history';

const COUNTS = (process.env.BENCH_HISTORY_COUNTS ?? '10000,100000').split(',').map(Number);
const MESSAGES = 20;
const WINDOW_S = Number(process.env.BENCH_HISTORY_WINDOW_S ?? 30);
/**
 * From the first /metrics to the idle window. A fresh `serve` holds its start-up heap for a while,
 * whatever the number of stored sessions, until V8 gives it back in a GC of its own timing: compiled,
 * after ~20-25 s (RSS ~120 → ~85 MiB here); through tsx, in steps until ~100 s (~155 → ~105 MiB).
 * Inside the window, that one GC would be most of the idle CPU and decide the RSS. The window starts after it.
 */
const SETTLE_S = Number(process.env.BENCH_HISTORY_SETTLE_S ?? 60);
const REPEAT = 11;
const RETAINED = Number(process.env.BENCH_HISTORY_RETAINED ?? 10_000);
const ROOT = join(import.meta.dirname, '..');
const SERVE_ROOT = process.env.BENCH_HISTORY_SERVE_ROOT ?? ROOT;
const TIME_LIMIT_MS = 20 * 60_000;

interface Template {
  id: string;
  meta: Record<string, string>;
  snapshot: string;
  history: string[];
  log: Array<[string, string[]]>;
  seq: string;
  fence: string;
  agent: Record<string, string>;
}

/** CPU time of every thread of a process, in ms, from /proc/<pid>/task/<tid>/schedstat (nanoseconds: no 10 ms tick). */
function cpuMs(pid: number): number {
  try {
    let ns = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`))
      ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    return ns / 1e6;
  } catch {
    return procCpuMs(pid).ownMs;
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address !== null ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

/** One session run for real (worker + fake pi), read back whole: the shape every copy gets. */
async function template(url: string, prefix: string, cleanup: Cleanup): Promise<Template> {
  const fakes = writeFakeAgents(tempDir('sessiond-bench-history-', cleanup), MESSAGES);
  const made: Redis[] = [];
  const connect = (): Redis => {
    const r = new Redis(url, { maxRetriesPerRequest: null });
    r.on('error', () => undefined);
    made.push(r);
    return r;
  };
  // Its template session runs in /tmp: the workspace of this deployment's policy.
  const policy = deploymentPolicy({ workspace: '/tmp' });
  const runtime = new Runtime({ connect, prefix, policy });
  const worker = new SessionWorker({
    policy,
    connect,
    keys: internals(runtime).keys,
    queue: createSessionQueue(connect(), internals(runtime).keys),
    ...WORKER_DEFAULTS,
    concurrency: 1,
    agentOptions: {
      pi: {
        command: fakes.shTurn,
        agentDir: fakes.agentDir,
        sessionDir: join(fakes.stateDir, 'pi-sessions'),
        extraArgs: [],
        env: { SESSIOND_STATE_DIR: fakes.stateDir },
      },
    },
    retentionMs: 30 * 86_400_000,
  });
  await worker.start();
  try {
    const { sessionId } = await runtime.enqueue({
      sessionId: 'template-session',
      prompt: 'Summarize the session store.',
      options: { cwd: '/tmp' },
    });
    const deadline = Date.now() + 60_000;
    while (
      (await internals(runtime).redis.hget(lifecycleKeys(internals(runtime).keys).states, sessionId)) !== 'completed' ||
      (await internals(runtime).store.leaseHolder(sessionId)) !== null
    ) {
      if (Date.now() > deadline) throw new BenchFailure('the template session did not complete within 60 s');
      await sleep(50);
    }
    const k = (part: (typeof SESSION_PARTS)[number]) => internals(runtime).keys.session(sessionId, part);
    const t: Template = {
      id: sessionId,
      meta: await internals(runtime).redis.hgetall(k('meta')),
      snapshot: (await internals(runtime).redis.get(k('snapshot'))) ?? '',
      history: await internals(runtime).redis.lrange(k('history'), 0, -1),
      log: (await internals(runtime).redis.xrange(k('log'), '-', '+')) as Array<[string, string[]]>,
      seq: (await internals(runtime).redis.get(k('seq'))) ?? '0',
      fence: (await internals(runtime).redis.get(k('fence'))) ?? '0',
      agent: await internals(runtime).redis.hgetall(k('agent')),
    };
    if (t.log.length !== MESSAGES)
      throw new BenchFailure(`the template session has ${t.log.length} messages, ${MESSAGES} expected`);
    await runtime.deleteSession(sessionId);
    return t;
  } finally {
    await worker.close(1000);
    await runtime.close();
    made.forEach((r) => r.disconnect());
  }
}

/** Copies the template as sessions `from`…`to-1` of `prefix`, with their fleet index entries, in pipelines of 250. */
async function populate(
  redis: Redis,
  prefix: string,
  t: Template,
  from: number,
  to: number,
  expireAt: (i: number) => number,
  updatedAt: number,
): Promise<void> {
  const keys = createKeys(prefix);
  const lk = lifecycleKeys(keys);
  for (let start = from; start < to; start += 250) {
    const pipeline = redis.pipeline();
    for (let i = start; i < Math.min(to, start + 250); i += 1) {
      const id = `hist-${i}-${randomBytes(4).toString('hex')}`;
      const k = (part: (typeof SESSION_PARTS)[number]) => keys.session(id, part);
      const swap = (s: string) => s.replaceAll(t.id, id);
      const created = updatedAt - 1000 + (i % 1000);
      pipeline.hset(k('meta'), {
        ...Object.fromEntries(Object.entries(t.meta).map(([f, v]) => [f, swap(v)])),
        createdAt: String(created),
        updatedAt: String(updatedAt),
      });
      pipeline.set(k('snapshot'), swap(t.snapshot));
      if (t.history.length > 0) pipeline.rpush(k('history'), ...t.history.map(swap));
      for (const [entryId, fields] of t.log) pipeline.xadd(k('log'), entryId, ...fields);
      pipeline.set(k('seq'), t.seq);
      pipeline.set(k('fence'), t.fence);
      if (Object.keys(t.agent).length > 0) pipeline.hset(k('agent'), t.agent);
      pipeline.zadd(keys.sessions, created, id);
      pipeline.hset(lk.states, id, 'completed');
      pipeline.zadd(lk.byState('completed'), created, id);
      pipeline.zadd(lk.finished, expireAt(i), id);
    }
    await pipeline.exec();
  }
}

interface Reading {
  sessions: number;
  serveCpuMsPerSec: number;
  redisCpuMsPerSec: number;
  /** The bare redis-server of the same size (see bareRedis): Redis's own idle cost with that much data. */
  bareRedisCpuMsPerSec: number;
  firstMetricsMs: number;
  /** Median of REPEAT scrapes spaced past the metrics cache (each one a refresh). */
  metricsMs: number;
  listFirstPageMs: number;
  list50thPageMs: number;
  serveRssBytes: number;
}

async function timed(url: string, init?: RequestInit): Promise<{ ms: number; response: Response; body: string }> {
  const started = performance.now();
  const response = await fetch(url, init);
  const body = await response.text();
  return { ms: performance.now() - started, response, body };
}

/**
 * Redis's own idle cost with a store's amount of data, measured beside it: a bare redis-server (no
 * client once filled) holding as many keys (`DEBUG POPULATE`) of the store's mean size. Its ratio
 * 100k ÷ 10k is what redis-server's idle CPU does with no sessiond at all: alone on this machine, two
 * such servers with 10 × the keys of the other idle at 1.17-1.20 × (Redis's cron over more data); in
 * this benchmark, six processes on two cores, a pair has measured 0.73 ×: the noise band of a figure
 * of ~2 ms/s. Returns its pid.
 */
async function bareRedis(
  store: Redis,
  sessions: number,
  cleanup: Cleanup,
  log: (line: string) => void,
): Promise<number> {
  const server = await startRedis({ extraArgs: ['--enable-debug-command', 'yes'] });
  cleanup.add(`bare redis-server (${sessions} sessions' size)`, () => server.stop());
  const [keys, used] = [await store.dbsize(), await usedMemory(store)];
  const bare = new Redis(server.url, { maxRetriesPerRequest: null });
  try {
    await bare.call('DEBUG', 'POPULATE', String(keys), 'bare', String(Math.max(1, Math.round(used / keys) - 64)));
    log(
      `  a bare redis-server of that size: ${await bare.dbsize()} keys, used_memory ${((await usedMemory(bare)) / 2 ** 20).toFixed(0)} MiB`,
    );
  } finally {
    bare.disconnect();
  }
  return server.pid;
}

/** One deployment under measurement: its redis-server and a fresh `sessiond serve` on it. */
interface Deployment {
  sessions: number;
  redisPid: number;
  barePid: number;
  child: ChildProcess;
  base: string;
}

async function startServe(
  redisUrl: string,
  redisPid: number,
  barePid: number,
  prefix: string,
  sessions: number,
  stateDir: string,
  cleanup: Cleanup,
): Promise<Deployment> {
  const port = await freePort();
  const child: ChildProcess = spawn(process.execPath, [serveBin(SERVE_ROOT), 'serve', '--port', String(port)], {
    cwd: SERVE_ROOT,
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: process.env.HOME ?? '/tmp',
      REDIS_URL: redisUrl,
      SESSIOND_PREFIX: prefix,
      SESSIOND_STATE_DIR: stateDir,
    },
    stdio: ['ignore', 'ignore', 'ignore'],
  });
  cleanup.add(`serve (${sessions} sessions)`, async () => {
    child.kill('SIGTERM');
    await new Promise((r) => (child.exitCode !== null ? r(null) : child.once('exit', r)));
  });
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    const ok = await fetch(`${base}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (Date.now() > deadline || child.exitCode !== null)
      throw new BenchFailure(`serve did not start (exit ${String(child.exitCode)})`);
    await sleep(100);
  }
  return { sessions, redisPid, barePid, child, base };
}

/** The median of the paired ratios large ÷ small (each pair measured back to back, in alternating order). */
function pairedRatio(small: readonly number[], large: readonly number[]): number {
  return median(small.map((s, i) => (large[i] as number) / s));
}

/**
 * Every figure of every deployment, measured in the same window (idle CPU) or interleaved request by
 * request (latencies, alternating which deployment goes first), so a load swing of this shared machine
 * falls on both sides of a ratio alike.
 */
async function measureAll(
  deployments: readonly Deployment[],
  log: (line: string) => void,
): Promise<{ readings: Reading[]; paired: Record<'metrics' | 'page1' | 'page50', number[][]> }> {
  const firsts: number[] = [];
  for (const d of deployments) {
    const first = await timed(`${d.base}/metrics`);
    if (!first.body.includes('sessiond_sessions{state="completed"}'))
      throw new BenchFailure('/metrics has no sessiond_sessions gauge');
    const completed = Number(/sessiond_sessions\{state="completed"\} (\d+)/.exec(first.body)?.[1]);
    if (completed < d.sessions)
      throw new BenchFailure(`/metrics counts ${completed} completed sessions, ${d.sessions} are stored`);
    firsts.push(first.ms);
  }
  // Background refreshes (every 5 s) have run before the window, and the start-up heap is given back (see SETTLE_S).
  await sleep(SETTLE_S * 1000);
  const cpu0 = deployments.map((d) => [cpuMs(d.child.pid ?? 0), cpuMs(d.redisPid), cpuMs(d.barePid)] as const);
  const t0 = performance.now();
  // Memory at rest: every deployment's RSS once a second over the idle window, before the requests
  // below leave garbage of their own; a reading is the median of its samples, not one instant of a GC cycle.
  const rssSamples: number[][] = deployments.map(() => []);
  while (performance.now() - t0 < WINDOW_S * 1000) {
    deployments.forEach((d, i) => rssSamples[i]?.push(procRssBytes(d.child.pid ?? 0)));
    await sleep(1000);
  }
  const seconds = (performance.now() - t0) / 1000;
  const cpu = deployments.map(
    (d, i) =>
      [
        (cpuMs(d.child.pid ?? 0) - (cpu0[i]?.[0] ?? 0)) / seconds,
        (cpuMs(d.redisPid) - (cpu0[i]?.[1] ?? 0)) / seconds,
        (cpuMs(d.barePid) - (cpu0[i]?.[2] ?? 0)) / seconds,
      ] as const,
  );
  const rss = rssSamples.map((samples) => median(samples));

  /** REPEAT rounds; in each, every deployment once, the order alternating round by round. */
  const interleaved = async (url: (d: Deployment, i: number) => string, pause = 0): Promise<number[][]> => {
    const times: number[][] = deployments.map(() => []);
    for (let round = 0; round < REPEAT; round += 1) {
      if (pause > 0) await sleep(pause);
      const order = deployments.map((_, i) => i);
      if (round % 2 === 1) order.reverse();
      for (const i of order) times[i]?.push((await timed(url(deployments[i] as Deployment, i))).ms);
    }
    return times;
  };
  const scrapes = await interleaved((d) => `${d.base}/metrics`, 3_100);
  const page1 = await interleaved((d) => `${d.base}/api/sessions?limit=100`);
  const cursors: Array<string | null> = [];
  for (const d of deployments) {
    let cursor: string | null = null;
    for (let page = 1; page < 50; page += 1) {
      const r = await timed(
        `${d.base}/api/sessions?limit=100${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`,
      );
      const parsed = JSON.parse(r.body) as { next?: string | null };
      // An older build (BENCH_HISTORY_SERVE_ROOT) has no cursor: no 50th page to time.
      if (parsed.next === undefined) break;
      cursor = parsed.next;
      if (cursor === null) throw new BenchFailure(`the listing ended at page ${page} of ${d.sessions} sessions`);
    }
    cursors.push(cursor);
  }
  const page50 = cursors.includes(null)
    ? deployments.map(() => [Number.NaN])
    : await interleaved(
        (d, i) => `${d.base}/api/sessions?limit=100&cursor=${encodeURIComponent(cursors[i] as string)}`,
      );
  const readings = deployments.map((d, i): Reading => {
    const reading: Reading = {
      sessions: d.sessions,
      serveCpuMsPerSec: cpu[i]?.[0] ?? Number.NaN,
      redisCpuMsPerSec: cpu[i]?.[1] ?? Number.NaN,
      bareRedisCpuMsPerSec: cpu[i]?.[2] ?? Number.NaN,
      firstMetricsMs: firsts[i] ?? Number.NaN,
      metricsMs: median(scrapes[i] ?? []),
      listFirstPageMs: median(page1[i] ?? []),
      list50thPageMs: median(page50[i] ?? []),
      serveRssBytes: rss[i] ?? Number.NaN,
    };
    log(
      `  ${d.sessions} stored sessions: serve idle ${reading.serveCpuMsPerSec.toFixed(2)} ms CPU/s, redis-server idle ${reading.redisCpuMsPerSec.toFixed(2)} ms CPU/s (a bare one of its size ${reading.bareRedisCpuMsPerSec.toFixed(2)}; over the same ${seconds.toFixed(0)} s); first /metrics ${reading.firstMetricsMs.toFixed(0)} ms, ` +
        `later ones (each a refresh) ${reading.metricsMs.toFixed(1)} ms; list page 1 ${reading.listFirstPageMs.toFixed(1)} ms, page 50 ${reading.list50thPageMs.toFixed(1)} ms; serve RSS ${(reading.serveRssBytes / 2 ** 20).toFixed(0)} MiB`,
    );
    return reading;
  });
  return { readings, paired: { metrics: scrapes, page1, page50 } };
}

async function usedMemory(redis: Redis): Promise<number> {
  return Number(/^used_memory:(\d+)/m.exec(await redis.info('memory'))?.[1] ?? Number.NaN);
}

/** Retention: used_memory before RETAINED sessions are made, and after the sweeper expired them all. */
async function retention(
  t: Template,
  cleanup: Cleanup,
  log: (line: string) => void,
): Promise<{ before: number; during: number; after: number; seconds: number }> {
  const server = await startRedis();
  cleanup.add('redis-server (retention)', () => server.stop());
  const redis = new Redis(server.url, { maxRetriesPerRequest: null });
  redis.on('error', () => undefined);
  cleanup.add('retention connection', () => void redis.disconnect());
  const prefix = 'bench-retention';
  const runtime = new Runtime({
    connect: () => {
      const r = new Redis(server.url, { maxRetriesPerRequest: null });
      r.on('error', () => undefined);
      return r;
    },
    prefix,
  });
  cleanup.add('retention runtime', () => runtime.close());
  const deps = {
    redis: internals(runtime).redis,
    keys: internals(runtime).keys,
    queue: internals(runtime).queue,
    publish: () => Promise.resolve(),
  };
  const updatedAt = Date.now() - 10_000;
  const drain = async () => {
    for (;;) {
      await sweep(deps, { retentionMs: 1000 });
      if ((await redis.zcard(lifecycleKeys(internals(runtime).keys).finished)) === 0) return;
    }
  };
  // Warm-up: the scripts loaded, the fleet keys made once.
  await populate(redis, prefix, t, 0, 100, () => Date.now() - 1, updatedAt);
  await drain();
  const before = await usedMemory(redis);
  await populate(redis, prefix, t, 100, 100 + RETAINED, () => Date.now() - 1, updatedAt);
  const during = await usedMemory(redis);
  const started = performance.now();
  await drain();
  const seconds = (performance.now() - started) / 1000;
  const after = await usedMemory(redis);
  const left = await redis.dbsize();
  const listed = await redis.zcard(internals(runtime).keys.sessions);
  if (listed !== 0) throw new BenchFailure(`${listed} sessions still listed after expiry`);
  log(
    `  retention: used_memory ${(before / 2 ** 20).toFixed(2)} MiB before, ${(during / 2 ** 20).toFixed(1)} MiB with ${RETAINED} finished sessions, ${(after / 2 ** 20).toFixed(2)} MiB after the sweeper expired them ` +
      `(${seconds.toFixed(1)} s, ${(RETAINED / seconds).toFixed(0)} sessions/s; ${left} keys left in the database)`,
  );
  return { before, during, after, seconds };
}

export async function run(log: (line: string) => void = console.log): Promise<Record<string, unknown>> {
  // `serve` runs compiled (serveBin): from these sources.
  if (SERVE_ROOT === ROOT) buildCheckout(ROOT);
  return bounded(name, TIME_LIMIT_MS, log, async (cleanup) => {
    const prefix = `bench-history-${randomBytes(3).toString('hex')}`;
    const stateDir = tempDir('sessiond-bench-history-state-', cleanup);
    // Each count is a deployment of its own (its own redis-server and `serve`), all up at once, so
    // that they are measured side by side.
    const servers = [];
    for (const count of COUNTS) {
      const server = await startRedis();
      cleanup.add(`redis-server (${count} sessions)`, () => server.stop());
      servers.push(server);
    }
    const t = await template((servers[0] as (typeof servers)[number]).url, prefix, cleanup);
    log(
      `${COUNTS.join(' and ')} stored finished sessions (each a completed turn of ${MESSAGES} messages, copied from one real session), each on its own redis-server with its own \`sessiond serve\`${SERVE_ROOT === ROOT ? '' : ` from ${SERVE_ROOT}`}, no worker, measured side by side`,
    );
    const populated: Array<{ server: (typeof servers)[number]; count: number; bare: number }> = [];
    for (const [i, count] of COUNTS.entries()) {
      const server = servers[i] as (typeof servers)[number];
      const redis = new Redis(server.url, { maxRetriesPerRequest: null });
      redis.on('error', () => undefined);
      cleanup.add(`connection (${count} sessions)`, () => void redis.disconnect());
      const started = performance.now();
      await populate(redis, prefix, t, 0, count, () => Date.now() + 30 * 86_400_000, Date.now() - 60_000);
      log(
        `  created ${count} sessions in ${((performance.now() - started) / 1000).toFixed(1)} s (pipelined writes), Redis used_memory ${((await usedMemory(redis)) / 2 ** 20).toFixed(0)} MiB`,
      );
      populated.push({ server, count, bare: await bareRedis(redis, count, cleanup, log) });
    }
    // Every `serve` starts once every store is filled, so that all are the same age when measured.
    const deployments = await Promise.all(
      populated.map(({ server, count, bare }) =>
        startServe(server.url, server.pid, bare, prefix, count, stateDir, cleanup),
      ),
    );
    const { readings, paired } = await measureAll(deployments, log);
    const [small, large] = [readings[0], readings.at(-1)];
    const ratio = (f: (r: Reading) => number) =>
      small === undefined || large === undefined || readings.length < 2 ? Number.NaN : f(large) / f(small);
    const pairs = (times: number[][]) =>
      readings.length < 2 ? Number.NaN : pairedRatio(times[0] ?? [], times.at(-1) ?? []);
    const idleCpuRatio = ratio((r) => r.serveCpuMsPerSec);
    const redisIdleCpuRatio = ratio((r) => r.redisCpuMsPerSec);
    const bareRedisIdleCpuRatio = ratio((r) => r.bareRedisCpuMsPerSec);
    const metricsLatencyRatio = pairs(paired.metrics);
    const firstMetricsRatio = ratio((r) => r.firstMetricsMs);
    const listPageRatio = pairs(paired.page50);
    const listFirstPageRatio = pairs(paired.page1);
    const memoryRatio = ratio((r) => r.serveRssBytes);
    if (readings.length > 1) {
      log(
        `  ratios ${COUNTS.at(-1)} ÷ ${COUNTS[0]} (target ≤ 1.2; latencies: median of paired ratios): serve idle CPU ${idleCpuRatio.toFixed(2)}, redis idle CPU ${redisIdleCpuRatio.toFixed(2)} (a bare redis-server's ${bareRedisIdleCpuRatio.toFixed(2)}), /metrics ${metricsLatencyRatio.toFixed(2)} (the first of a fresh serve ${firstMetricsRatio.toFixed(2)}), ` +
          `list page 1 ${listFirstPageRatio.toFixed(2)}, page 50 ${listPageRatio.toFixed(2)}, serve RSS ${memoryRatio.toFixed(2)}`,
      );
    }
    const kept = RETAINED > 0 && SERVE_ROOT === ROOT ? await retention(t, cleanup, log) : null;
    const memoryAfterExpiryRatio = kept === null ? Number.NaN : kept.after / kept.before;
    if (kept !== null)
      log(`  used_memory after expiry ÷ before creation: ${memoryAfterExpiryRatio.toFixed(3)} (target ≤ 1.1)`);
    return {
      bench: name,
      idleCpuRatio: orNull(round(idleCpuRatio, 3)),
      metricsLatencyRatio: orNull(round(metricsLatencyRatio, 3)),
      listPageRatio: orNull(round(listPageRatio, 3)),
      memoryAfterExpiryRatio: orNull(round(memoryAfterExpiryRatio, 3)),
      redisIdleCpuRatio: orNull(round(redisIdleCpuRatio, 3)),
      bareRedisIdleCpuRatio: orNull(round(bareRedisIdleCpuRatio, 3)),
      firstMetricsRatio: orNull(round(firstMetricsRatio, 3)),
      listFirstPageRatio: orNull(round(listFirstPageRatio, 3)),
      serveMemoryRatio: orNull(round(memoryRatio, 3)),
      readings: readings.map((r) => ({
        sessions: r.sessions,
        serveCpuMsPerSec: round(r.serveCpuMsPerSec, 2),
        redisCpuMsPerSec: round(r.redisCpuMsPerSec, 2),
        bareRedisCpuMsPerSec: round(r.bareRedisCpuMsPerSec, 2),
        firstMetricsMs: round(r.firstMetricsMs, 1),
        metricsMs: round(r.metricsMs, 1),
        listFirstPageMs: round(r.listFirstPageMs, 2),
        list50thPageMs: orNull(round(r.list50thPageMs, 2)),
        serveRssMiB: round(r.serveRssBytes / 2 ** 20, 1),
      })),
    };
  });
}

/**
 * What runs `serve`: the checkout's compiled CLI (bin/sessiond.mjs over dist/, built by run() for
 * this checkout), as a deployment runs it; for a checkout with no build, its development bin (its
 * sources through tsx), or bin/sessiond.mjs of a checkout older than both. A `serve` through tsx
 * gives its start-up heap back in steps over ~100 s (the transforms' garbage), each step a GC of
 * ~200 ms of CPU: in a 30 s window, noise larger than anything idle it does.
 */
function serveBin(root: string): string {
  const dev = join(root, 'bin', 'sessiond-dev.mjs');
  if (existsSync(join(root, 'dist', 'src', 'interfaces', 'cli', 'entry.js')) || !existsSync(dev))
    return join(root, 'bin', 'sessiond.mjs');
  return dev;
}
