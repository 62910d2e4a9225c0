import { randomBytes } from 'node:crypto';
import { cpus } from 'node:os';
import type { SessionPart } from '../src/runtime/keys.ts';
import { startRedis } from '../test/support/redis.ts';
import { BenchFailure } from './support/benchmark.ts';
import { HANG_CMDLINE, writeFakeAgents, type FakeAgents } from './support/fake-agents.ts';
import { Fleet, sessionIds, type FleetRun } from './support/fleet.ts';
import {
  bounded,
  orNull,
  pool,
  processesMentioning,
  procRssBytes,
  sleep,
  tempDir,
  type Cleanup,
  type Deadline,
} from './support/harness.ts';
import { median, round } from './support/timing.ts';
import { internals } from '../src/runtime/internals.ts';

/**
 * Horizontal scaling and memory, with real worker processes
 * (`node bin/sessiond.mjs worker`, configured by environment variables) on one
 * real redis-server (AOF off), sessions enqueued from this process.
 *
 * 1. Throughput: SESSIONS sessions of one prompt each with 1, 2 and 4 worker
 *    processes of CONCURRENCY each, timed from the first enqueue to the last
 *    "session released". The agent is the cheapest process there is (a /bin/sh
 *    fake pi printing one whole turn of MESSAGES messages, see
 *    support/fake-agents.ts), so what is measured is sessiond, not the agent;
 *    BENCH_SCALING_AGENT=node uses the Node fake pi instead (then the machine's
 *    cores go to starting Node processes). The three fleets live side by side,
 *    each on its own prefix, and their runs are interleaved (1, 2, 4, then
 *    4, 2, 1…) so that the machine's other load falls on all three alike;
 *    medians of REPETITIONS runs after a warm-up. Baseline: 1 worker;
 *    ratio = sessions/s with 4 ÷ with 1. On a 2-core machine, 4 processes share
 *    2 cores with redis-server, this process and the agents.
 * 2. Memory per active session: one worker process (concurrency ACTIVE)
 *    driving ACTIVE long-running sessions (a /bin/sh fake pi that prints the
 *    start of a turn and then sleeps), against the same worker warmed up (a
 *    few sessions started and cancelled) and idle: the worker's VmRSS (/proc/<pid>/status) and V8 heap + external
 *    (support/worker-probe.mjs: a GC, then process.memoryUsage()) during ÷
 *    ACTIVE. RSS is what the operator pays but moves with the allocator (pages
 *    freed by a GC are not all given back); heap + external after a GC is what
 *    the sessions hold. The agent processes themselves are not counted (a real pi is a
 *    Node process of its own, ~50-100 MB).
 * 3. Memory per idle session: sessions at rest (one completed turn of MESSAGES
 *    messages, not held by any worker) cost only Redis: MEMORY USAGE of every
 *    key of the session, plus its share of the fleet-wide indexes (sessions,
 *    states, activations); cross-check: INFO used_memory before and after.
 */
export const name = 'scaling';

const WORKER_COUNTS = [1, 2, 4] as const;
const CONCURRENCY = 8;
const SESSIONS = Number(process.env.BENCH_SCALING_SESSIONS ?? 500);
const AGENT = process.env.BENCH_SCALING_AGENT === 'node' ? 'node' : 'sh';
const WARMUP = 150;
const REPETITIONS = 5;
const MESSAGES = 20;
const ACTIVE = Number(process.env.BENCH_SCALING_ACTIVE ?? 200);
/**
 * Before the idle reading, MEMORY_WARMUPS cycles of WARM_ACTIVE sessions started and cancelled: every code
 * path has run (lazy modules, JIT) but the heap and the allocator have not grown to the full load yet, so
 * that the reading with ACTIVE sessions shows what they add.
 */
const MEMORY_WARMUPS = 2;
const WARM_ACTIVE = 16;
const IDLE = 500;
const SESSION_PARTS: readonly SessionPart[] = [
  'meta',
  'snapshot',
  'inbox',
  'log',
  'seq',
  'lease',
  'fence',
  'cancel',
  'history',
  'agent',
  'active',
];
/** Everything, setup and teardown included, must end within this. */
const TIME_LIMIT_MS = 5 * 60_000;

interface Ctx {
  url: string;
  redisPid: number;
  runId: string;
  cleanup: Cleanup;
  deadline: Deadline;
  log: (line: string) => void;
  fakes: FakeAgents;
}

function startFleet(ctx: Ctx, what: string, workers: number, concurrency: number, piCommand: string): Promise<Fleet> {
  return Fleet.start(
    {
      workers,
      url: ctx.url,
      prefix: `bench-${ctx.runId}-${what}`,
      concurrency,
      piCommand,
      piArgs: ['--messages', String(MESSAGES)],
      stateDir: ctx.fakes.stateDir,
      agentDir: ctx.fakes.agentDir,
    },
    ctx.redisPid,
    ctx.cleanup,
    ctx.deadline,
  );
}

// ---------------------------------------------------------------- 1. throughput against workers

async function throughput(ctx: Ctx): Promise<Record<string, number>> {
  const command = AGENT === 'node' ? ctx.fakes.nodeTurn : ctx.fakes.shTurn;
  const fleets = new Map<number, Fleet>();
  for (const k of WORKER_COUNTS) fleets.set(k, await startFleet(ctx, `w${k}`, k, CONCURRENCY, command));
  const timeout = Math.max(60_000, SESSIONS * (AGENT === 'node' ? 200 : 50));
  for (const [k, fleet] of fleets) await fleet.run(sessionIds(WARMUP * k, 'warm'), timeout);
  const runs: Record<string, FleetRun[]> = {};
  for (let rep = 0; rep < REPETITIONS; rep += 1) {
    const order = rep % 2 === 0 ? WORKER_COUNTS : [...WORKER_COUNTS].reverse();
    for (const k of order) {
      const fleet = fleets.get(k) as Fleet;
      (runs[k] ??= []).push(await fleet.run(sessionIds(SESSIONS, `r${rep}`), timeout));
    }
  }
  const perSec: Record<string, number> = {};
  for (const k of WORKER_COUNTS) {
    const fleet = fleets.get(k) as Fleet;
    await fleet.verify(
      [
        ...sessionIds(WARMUP * k, 'warm'),
        ...Array.from({ length: REPETITIONS }, (_, rep) => sessionIds(SESSIONS, `r${rep}`)).flat(),
      ],
      MESSAGES,
    );
    const r = runs[k] ?? [];
    perSec[k] = median(r.map((x) => x.perSec));
    const busiest = fleet.workers.map((w) => w.released);
    const cpu = (key: keyof FleetRun['cpuUs']): string => (median(r.map((x) => x.cpuUs[key])) / 1000).toFixed(2);
    ctx.log(
      `  ${k} worker${k > 1 ? 's' : ' '} × concurrency ${CONCURRENCY}: ${r.map((x) => `${x.perSec.toFixed(1)}/s`).join(', ')} → median ${(perSec[k] ?? Number.NaN).toFixed(1)} sessions/s; ` +
        `sessions per worker ${busiest.join('/')}; CPU per session (median, ms): workers ${cpu('workers')}, agents ${cpu('agents')}, redis-server ${cpu('redis')}, producer ${cpu('producer')}`,
    );
  }
  for (const fleet of fleets.values()) await fleet.close();
  return perSec;
}

// ---------------------------------------------------------------- 2. memory per active session

interface MemorySample {
  rss: number;
  /** V8 heap used + external (Buffers and other memory held by JS objects outside the heap). */
  heapUsed: number;
}

/** The worker's memory after a GC: VmRSS read from /proc right after the probe's GC, and the probe's heapUsed + external; median of 3. */
async function workerMemory(fleet: Fleet): Promise<MemorySample> {
  const worker = fleet.workers[0];
  if (worker === undefined) throw new BenchFailure('no worker');
  const samples: MemorySample[] = [];
  for (let i = 0; i < 3; i += 1) {
    const probe = await worker.probeMemory();
    samples.push({ rss: procRssBytes(worker.pid), heapUsed: probe.heapUsed + probe.external });
    await sleep(100);
  }
  return { rss: median(samples.map((s) => s.rss)), heapUsed: median(samples.map((s) => s.heapUsed)) };
}

/** Waits until every session of `ids` is running and its agent printed its first lines (session.started + 2 deltas in the log). */
async function waitAllRunning(fleet: Fleet, ids: readonly string[], timeoutMs: number): Promise<void> {
  const { redis, store } = internals(fleet.runtime);
  // A deadline of its own (not withTimeout around the loop): a loop left behind would go on polling.
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const states = await fleet.runtime.sessionStates(ids).then((byId) => ids.map((id) => byId[id] ?? null));
    const pipeline = redis.pipeline();
    for (const id of ids) pipeline.xlen(store.key(id, 'log'));
    const lengths = ((await pipeline.exec()) ?? []).map(([error, value]) => (error === null ? Number(value) : 0));
    const ready = ids.filter((_, i) => states[i] === 'running' && (lengths[i] ?? 0) >= 3).length;
    if (ready === ids.length) return;
    if (Date.now() > deadline)
      throw new BenchFailure(
        `timed out after ${(timeoutMs / 1000).toFixed(1)} s: ${ids.length} long-running sessions running (${ready} so far)`,
      );
    await sleep(100);
  }
}

async function cancelAll(fleet: Fleet, ids: readonly string[], timeoutMs: number): Promise<void> {
  await pool(ids, 16, async (id) => {
    const { delivered } = await fleet.runtime.cancel(id, 'bench: end of the memory measurement');
    if (delivered !== 'worker') throw new BenchFailure(`cancel ${id}: delivered "${delivered}", expected "worker"`);
  });
  await fleet.waitReleased(ids, timeoutMs);
  const states = await fleet.runtime.sessionStates(ids).then((byId) => ids.map((id) => byId[id] ?? null));
  const notCancelled = states.filter((s) => s !== 'cancelled').length;
  if (notCancelled > 0) throw new BenchFailure(`${notCancelled} long-running sessions did not end cancelled`);
}

async function activeMemory(ctx: Ctx): Promise<{ rssPerSession: number; heapPerSession: number }> {
  const fleet = await startFleet(ctx, 'active', 1, ACTIVE, ctx.fakes.shHang);
  const timeout = ctx.deadline.cap(60_000);
  // Warm-up: a few sessions, then back to idle, so that one-time costs (code loaded and compiled) are paid before the baseline.
  for (let cycle = 0; cycle < MEMORY_WARMUPS; cycle += 1) {
    const warm = sessionIds(WARM_ACTIVE, `warm${cycle}`);
    await pool(warm, 16, (id) => fleet.runtime.enqueue({ sessionId: id, prompt: 'warm-up' }));
    await waitAllRunning(fleet, warm, timeout);
    await cancelAll(fleet, warm, timeout);
  }
  await sleep(500);
  const idle = await workerMemory(fleet);
  const ids = sessionIds(ACTIVE, 'active');
  await pool(ids, 16, (id) =>
    fleet.runtime.enqueue({ sessionId: id, prompt: 'Summarize the session store in one paragraph.' }),
  );
  await waitAllRunning(fleet, ids, timeout);
  await sleep(500);
  const busy = await workerMemory(fleet);
  const agents = processesMentioning(HANG_CMDLINE).length;
  await cancelAll(fleet, ids, timeout);
  await sleep(500);
  const after = await workerMemory(fleet);
  await fleet.close();
  const left = processesMentioning(HANG_CMDLINE);
  if (left.length > 0)
    throw new BenchFailure(
      `${left.length} long-running fake agents still alive after cancel and worker stop: ${left.join(', ')}`,
    );
  const mib = (b: number): string => `${(b / 2 ** 20).toFixed(1)} MiB`;
  const rssPerSession = (busy.rss - idle.rss) / ACTIVE;
  const heapPerSession = (busy.heapUsed - idle.heapUsed) / ACTIVE;
  ctx.log(
    `  worker warmed up (${MEMORY_WARMUPS} × ${WARM_ACTIVE} sessions started and cancelled) and idle: RSS ${mib(idle.rss)}, heap+external ${mib(idle.heapUsed)}; driving ${ACTIVE} running sessions (${agents} agent processes alive): ` +
      `RSS ${mib(busy.rss)}, heap+external ${mib(busy.heapUsed)}; after cancelling them all: RSS ${mib(after.rss)}, heap+external ${mib(after.heapUsed)}`,
  );
  ctx.log(
    `  per active session: ${(rssPerSession / 1024).toFixed(1)} KiB RSS, ${(heapPerSession / 1024).toFixed(1)} KiB V8 heap + external (worker process only, agent processes not counted; after a GC, median of 3 probes each)`,
  );
  return { rssPerSession, heapPerSession };
}

// ---------------------------------------------------------------- 3. Redis per idle session

async function idleRedisBytes(
  ctx: Ctx,
): Promise<{ keysPerSession: number; indexesPerSession: number; usedMemoryPerSession: number }> {
  const fleet = await startFleet(ctx, 'idle', 1, CONCURRENCY, AGENT === 'node' ? ctx.fakes.nodeTurn : ctx.fakes.shTurn);
  const { redis, keys, store } = internals(fleet.runtime);
  const warm = sessionIds(20, 'warm');
  await fleet.run(warm, 60_000);
  await sleep(300);
  const usedMemory = async (): Promise<number> =>
    Number(/^used_memory:(\d+)/m.exec(await redis.info('memory'))?.[1] ?? Number.NaN);
  const before = await usedMemory();
  const ids = sessionIds(IDLE, 'idle');
  await fleet.run(ids, ctx.deadline.cap(120_000));
  await sleep(300);
  const after = await usedMemory();
  await fleet.verify(ids, MESSAGES);
  const pipeline = redis.pipeline();
  for (const id of ids)
    for (const part of SESSION_PARTS) pipeline.call('MEMORY', 'USAGE', store.key(id, part), 'SAMPLES', '0');
  const usages = ((await pipeline.exec()) ?? []).map(([error, value]) =>
    error === null && typeof value === 'number' ? value : 0,
  );
  const perPart = new Map<string, number>();
  usages.forEach((bytes, i) => {
    const part = SESSION_PARTS[i % SESSION_PARTS.length] ?? '?';
    perPart.set(part, (perPart.get(part) ?? 0) + bytes);
  });
  const keysPerSession = usages.reduce((a, b) => a + b, 0) / ids.length;
  const total = await redis.zcard(keys.sessions);
  let indexes = 0;
  for (const key of [keys.sessions, keys.activations])
    indexes += Number((await redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) ?? 0);
  const indexesPerSession = indexes / total;
  const usedMemoryPerSession = (after - before) / ids.length;
  await fleet.close();
  const parts = [...perPart.entries()]
    .filter(([, b]) => b > 0)
    .map(([p, b]) => `${p} ${(b / ids.length).toFixed(0)}`)
    .join(', ');
  ctx.log(
    `  ${IDLE} sessions at rest (one completed turn of ${MESSAGES} messages each, no worker holding them): ${keysPerSession.toFixed(0)} B of session keys (MEMORY USAGE, per key kind: ${parts}) ` +
      `+ ${indexesPerSession.toFixed(0)} B share of the fleet-wide indexes = ${(keysPerSession + indexesPerSession).toFixed(0)} B per session`,
  );
  ctx.log(
    `  cross-check: INFO used_memory grew by ${usedMemoryPerSession.toFixed(0)} B per session (everything, BullMQ's bookkeeping included)`,
  );
  return { keysPerSession, indexesPerSession, usedMemoryPerSession };
}

// ---------------------------------------------------------------- the run

export async function run(log: (line: string) => void = console.log): Promise<Record<string, unknown>> {
  return bounded(name, TIME_LIMIT_MS, log, async (cleanup, deadline) => {
    const redis = await startRedis();
    cleanup.add('redis-server', () => redis.stop());
    const tmp = tempDir('sessiond-bench-scaling-', cleanup);
    const ctx: Ctx = {
      url: redis.url,
      redisPid: redis.pid,
      runId: randomBytes(3).toString('hex'),
      cleanup,
      deadline,
      log,
      fakes: writeFakeAgents(tmp, MESSAGES),
    };
    const cores = cpus().length;
    log(
      `1. ${SESSIONS} sessions × 1 turn × ${MESSAGES} messages per run, fake pi = ${AGENT === 'node' ? 'a Node process' : 'a /bin/sh script (builtins only)'}; ` +
        `1, 2 and 4 worker processes (node bin/sessiond.mjs worker) × concurrency ${CONCURRENCY}, one redis-server, producer in this process; ` +
        `this machine has ${cores} cores: ${Math.max(...WORKER_COUNTS)} worker processes share ${cores} cores with redis-server, the producer and the agents`,
    );
    const perSec = await throughput(ctx);
    const one = perSec['1'] ?? Number.NaN;
    const four = perSec['4'] ?? Number.NaN;
    const ratio = four / one;
    log(
      `  scaling: 2 workers ${((perSec['2'] ?? Number.NaN) / one).toFixed(2)}× one worker, 4 workers ${ratio.toFixed(2)}× (on ${cores} cores)`,
    );
    log(
      `  checked: every session completed, ${MESSAGES} messages each (XLEN), 3 per fleet read back in full; no worker warning or error`,
    );

    log(
      `2. memory per active session: one worker process, concurrency ${ACTIVE}, ${ACTIVE} long-running sessions (fake pi: /bin/sh, prints the start of a turn, then sleeps)`,
    );
    const active = await activeMemory(ctx);
    log(
      `  checked: every session ran, was cancelled (delivered to the worker) and released; no fake agent process left`,
    );

    log(`3. memory per idle session (Redis only: a session at rest is not in any worker)`);
    const idle = await idleRedisBytes(ctx);

    const perSecOut: Record<string, number | null> = {};
    for (const k of WORKER_COUNTS) perSecOut[k] = orNull(round(perSec[k] ?? Number.NaN, 1));
    return {
      bench: name,
      sessionsPerSec: perSecOut,
      ratio: orNull(round(ratio, 3)),
      bytesPerActiveSession: orNull(Math.round(active.rssPerSession)),
      heapBytesPerActiveSession: orNull(Math.round(active.heapPerSession)),
      redisBytesPerIdleSession: orNull(Math.round(idle.keysPerSession + idle.indexesPerSession)),
      redisUsedMemoryPerIdleSession: orNull(Math.round(idle.usedMemoryPerSession)),
      cores,
      concurrencyPerWorker: CONCURRENCY,
      agent: AGENT,
    };
  });
}
