import { spawn, type ChildProcess } from 'node:child_process';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { randomBytes, randomUUID } from 'node:crypto';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Queue, Worker } from 'bullmq';
import { CANCEL_STAGES_CHANNEL, type CancelStageEvent } from '../src/process/cancel-stages.ts';
import { createKeys } from '../src/runtime/keys.ts';
import { ACTIVATION_JOB, JOB_OPTIONS, QUEUE_NAME } from '../src/runtime/queue.ts';
import { Runtime, type SessionRecord } from '../src/runtime/runtime.ts';
import { SessionWorker, type WorkerOptions } from '../src/runtime/worker.ts';
import { startRedis, type RedisServer } from '../test/support/redis.ts';
import { BenchFailure } from './support/benchmark.ts';
import {
  bounded,
  Cleanup,
  Deadline,
  orNull,
  percentile,
  pool,
  processesMentioning,
  procCpuMs,
  sleep,
  tempDir,
  verifySessions,
  withTimeout,
} from './support/harness.ts';
import { writeFakeAgents } from './support/fake-agents.ts';
import { PRODUCER_IN_FLIGHT, PROMPT } from './support/fleet.ts';
import * as fakeAgent from './support/fake-agent.ts';
import { median, round } from './support/timing.ts';
import { bareWorker, benchWorker, connector } from './support/worker.ts';
import { internals } from '../src/runtime/internals.ts';

/**
 * The durable runtime on one real Redis (started here, AOF off), in one run:
 *
 * 1. Throughput: SESSIONS sessions, each one prompt whose in-process fake agent
 *    emits 20 messages at once, end to end — `Runtime.enqueue` → BullMQ →
 *    SessionWorker (lease, restore, inbox, attempt, every transition and message
 *    persisted, release) — against bare BullMQ: the same number of jobs, the
 *    same job options, added the same way, taken by a no-op processor at the
 *    same concurrency on the same Redis (its own prefix). Both sides are timed
 *    from the first enqueue/add to the last completion, the producer running
 *    alongside the worker in this process with PRODUCER_IN_FLIGHT calls in
 *    flight. ratio = sessionsPerSec / baselineJobsPerSec (target ≥ 0.4), medians
 *    of REPETITIONS alternating runs after a warm-up; the CPU per item of this
 *    process and of redis-server is printed as a cross-check that depends
 *    less on what else runs on the machine.
 * 2. Messages persisted per second for turns of LONG_MESSAGES messages.
 * 3. Cancel latency, from `cancel()` called in another process (a
 *    `node --import tsx` client) to the turn's `cancelled` transition (its
 *    timestamp in the session history; the time getSession first shows it is
 *    printed too), for a fake pi (a real child process) that exits on SIGTERM
 *    and for one that ignores SIGINT/SIGTERM (the SIGKILL stage: ~2 s).
 *
 * The fake agent is one of the benchmark's own, defined with `defineAgent`: see support/fake-agent.ts.
 */
export const name = 'queue';

const CONCURRENCY = 8;
const SESSIONS = Number(process.env.BENCH_QUEUE_SESSIONS ?? 1000);
/** Which parts run (default all; for working on one part): e.g. BENCH_QUEUE_PARTS=3. Skipped figures are null. */
const PARTS = new Set((process.env.BENCH_QUEUE_PARTS ?? '1,2,3').split(',').map((p) => p.trim()));
/**
 * Items each side runs before the timed runs. A worker runs for hours: what counts is its steady
 * state, once V8 has optimised the hot paths. Measured: the session path's CPU per item falls until
 * about 3,000 sessions (1,300 → 600 µs), the bare job's after a few hundred jobs.
 */
const WARMUP_SESSIONS = Number(process.env.BENCH_QUEUE_WARMUP ?? 4000);
// No forced GC before a timed run (unlike the CPU-bound micro-benchmarks): a full `gc()` makes V8
// drop optimised code, and each run then re-measured the warm-up of the session path (~2× its
// steady-state CPU per session; the bare job's much smaller path recovers within a few hundred jobs).
const REPETITIONS = 5;
const MESSAGES_PER_TURN = 20;
const LONG_SESSIONS = 50;
const LONG_MESSAGES = 1000;
const COOPERATIVE_SAMPLES = 30;
const COOPERATIVE_BATCH = 6;
const STUBBORN_SAMPLES = 30;
/**
 * Stubborn cancels run STUBBORN_BATCH at a time, this far apart: they overlap only while each
 * waits out the 2 s grace, and their SIGKILL stages (a /proc scan, `ps`, a sweep) do not.
 */
const STUBBORN_BATCH = 4;
const STUBBORN_STAGGER_MS = 250;
const POLL_MS = 5;
/** BENCH_CANCEL_STAGES=1: part 3 also says where each cancel's time went, stage by stage (src/process/cancel-stages.ts). */
const CANCEL_STAGES = process.env.BENCH_CANCEL_STAGES === '1';
const STAGE_ORDER = [
  'bus',
  'applied',
  'signalled',
  'exited',
  'swept',
  'ended',
  'machine',
  'written',
  'observed',
] as const;
const TARGET_RATIO = 0.4;
/** Everything, setup and teardown included, must end within this. */
const TIME_LIMIT_MS = 10 * 60_000;

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..');

// ---------------------------------------------------------------- plumbing

let prefixCounter = 0;
function newPrefix(runId: string, what: string): string {
  prefixCounter += 1;
  return `bench-${runId}-${what}-${prefixCounter}`;
}

function sessionIds(n: number): string[] {
  return Array.from({ length: n }, (_, i) => `s${i}`);
}

export interface Ctx {
  url: string;
  redisPid: number;
  runId: string;
  deadline: Deadline;
  cleanup: Cleanup;
  log: (line: string) => void;
}

type Side = { prefix: string; runtime: Runtime; worker: SessionWorker; problems: string[]; close: () => Promise<void> };

/**
 * A SessionWorker (and a Runtime to enqueue with) on a fresh prefix, or on
 * `options.prefix`; `options.beforeStart` runs just before the worker starts.
 */
async function sessionSide(
  ctx: Ctx,
  what: string,
  agentOptions: WorkerOptions['agentOptions'],
  onReleased: (sessionId: string) => void = () => undefined,
  options: { prefix?: string; beforeStart?: () => void } = {},
): Promise<Side> {
  const prefix = options.prefix ?? newPrefix(ctx.runId, what);
  const { connect, closeAll } = connector(ctx.url);
  const keys = createKeys(prefix);
  const runtime = new Runtime({ connect, prefix });
  const problems: string[] = [];
  const worker = benchWorker(connect, keys, {
    concurrency: CONCURRENCY,
    agentOptions,
    log: (level, message, fields) => {
      if (message === 'session released' && fields?.outcome === 'released' && typeof fields.sessionId === 'string')
        onReleased(fields.sessionId);
      else if (level !== 'info') problems.push(`${level}: ${message} ${JSON.stringify(fields ?? {})}`);
    },
  });
  const close = ctx.cleanup.add(`${what} worker`, async () => {
    await worker.close(2000).catch(() => undefined);
    await runtime.close().catch(() => undefined);
    closeAll();
  });
  await internals(runtime).redis.ping();
  await internals(runtime).queue.queue.waitUntilReady();
  options.beforeStart?.();
  await worker.start();
  return { prefix, runtime, worker, problems, close };
}

// ---------------------------------------------------------------- 1 + 2: sessions through the runtime

export interface Throughput {
  n: number;
  wallMs: number;
  perSec: number;
  /** CPU per item, in microseconds: this process (producer and worker) and redis-server. */
  nodeCpuUs: number;
  redisCpuUs: number;
}

/** CPU time of this process and of redis-server from now on; redis-server's from /proc (Linux; NaN elsewhere). */
function cpuMeter(redisPid: number): () => { nodeMs: number; redisMs: number } {
  const node = process.cpuUsage();
  const redis = procCpuMs(redisPid).ownMs;
  return () => {
    const used = process.cpuUsage(node);
    return { nodeMs: (used.user + used.system) / 1000, redisMs: procCpuMs(redisPid).ownMs - redis };
  };
}

function throughput(n: number, wallMs: number, cpu: { nodeMs: number; redisMs: number }): Throughput {
  return {
    n,
    wallMs,
    perSec: n / (wallMs / 1000),
    nodeCpuUs: (cpu.nodeMs * 1000) / n,
    redisCpuUs: (cpu.redisMs * 1000) / n,
  };
}

/**
 * `n` sessions of one prompt each; the fake agent emits `messages` messages.
 * Timed from the first enqueue to the last session released (all persisted).
 * `preload`: everything is enqueued before the worker starts (the worker alone is timed).
 */
export async function runSessions(ctx: Ctx, n: number, messages: number, preload = false): Promise<Throughput> {
  const released = new Set<string>();
  let allReleased: () => void = () => undefined;
  const done = new Promise<void>((resolve) => (allReleased = resolve));
  const onReleased = (sessionId: string): void => {
    released.add(sessionId);
    if (released.size === n) allReleased();
  };
  const ids = sessionIds(n);
  const agentOptions = fakeAgent.fakeHostOptions({ messages });
  let start = 0;
  let meter = cpuMeter(ctx.redisPid);
  let side: Side;
  if (preload) {
    // Everything is enqueued before the worker exists: nothing takes the jobs yet.
    const prefix = newPrefix(ctx.runId, 'sessions-pre');
    const { connect, closeAll } = connector(ctx.url);
    const runtime = new Runtime({ connect, prefix });
    await pool(ids, PRODUCER_IN_FLIGHT, (sessionId) =>
      runtime.enqueue({ sessionId, prompt: PROMPT, options: fakeAgent.fakeTurnOptions() }),
    );
    await runtime.close();
    closeAll();
    side = await sessionSide(ctx, 'sessions-pre', agentOptions, onReleased, {
      prefix,
      beforeStart: () => {
        meter = cpuMeter(ctx.redisPid);
        start = performance.now();
      },
    });
  } else {
    side = await sessionSide(ctx, 'sessions', agentOptions, onReleased);
    meter = cpuMeter(ctx.redisPid);
    start = performance.now();
    await pool(ids, PRODUCER_IN_FLIGHT, (sessionId) =>
      side.runtime.enqueue({ sessionId, prompt: PROMPT, options: fakeAgent.fakeTurnOptions() }),
    );
  }
  await withTimeout(
    done,
    ctx.deadline.cap(Math.max(60_000, n * messages * 2)),
    `${n} sessions released (${released.size} so far)`,
  );
  const wallMs = performance.now() - start;
  const cpu = meter();
  await verifySessions(side.runtime, ids, messages);
  if (side.problems.length > 0)
    throw new BenchFailure(`worker reported problems:\n  ${side.problems.slice(0, 5).join('\n  ')}`);
  await side.close();
  return throughput(n, wallMs, cpu);
}

// ---------------------------------------------------------------- 1: the bare BullMQ baseline

async function runBaseline(ctx: Ctx, n: number, preload = false): Promise<Throughput> {
  const prefix = newPrefix(ctx.runId, 'bullmq');
  const { connect, closeAll } = connector(ctx.url);
  const queuePrefix = createKeys(prefix).queuePrefix;
  const queue = new Queue(QUEUE_NAME, {
    connection: connect('base-queue'),
    prefix: queuePrefix,
    defaultJobOptions: JOB_OPTIONS,
  });
  let completed = 0;
  let failed = 0;
  let allDone: () => void = () => undefined;
  const done = new Promise<void>((resolve) => (allDone = resolve));
  let worker: Worker | null = null;
  const startWorker = async (): Promise<void> => {
    const w = bareWorker(connect, queuePrefix, CONCURRENCY, async () => 'done');
    worker = w;
    w.on('completed', () => {
      completed += 1;
      if (completed === n) allDone();
    });
    w.on('failed', () => (failed += 1));
    w.on('error', () => undefined);
    await w.waitUntilReady();
  };
  const close = ctx.cleanup.add('baseline worker', async () => {
    await (worker as Worker | null)?.close().catch(() => undefined);
    await queue.close().catch(() => undefined);
    closeAll();
  });
  await queue.waitUntilReady();
  const add = (sessionId: string) =>
    queue.add(ACTIVATION_JOB, { sessionId }, { jobId: `${sessionId}.${randomUUID()}` });
  const ids = sessionIds(n);
  let start: number;
  let meter: ReturnType<typeof cpuMeter>;
  if (preload) {
    await pool(ids, PRODUCER_IN_FLIGHT, add);
    meter = cpuMeter(ctx.redisPid);
    start = performance.now();
    await startWorker();
  } else {
    await startWorker();
    meter = cpuMeter(ctx.redisPid);
    start = performance.now();
    await pool(ids, PRODUCER_IN_FLIGHT, add);
  }
  await withTimeout(done, ctx.deadline.cap(60_000), `${n} bare jobs completed (${completed} so far)`);
  const wallMs = performance.now() - start;
  const cpu = meter();
  if (failed > 0) throw new BenchFailure(`baseline: ${failed} jobs failed`);
  await close();
  return throughput(n, wallMs, cpu);
}

// ---------------------------------------------------------------- 3: cancel from another process

/** The cancel client process: one JSON request per line in, one reply per line out. */
export class CancelClient {
  readonly #child: ChildProcess;
  readonly #waiting = new Map<string, (reply: Record<string, unknown>) => void>();
  readonly ready: Promise<void>;

  constructor(url: string) {
    this.#child = spawn(process.execPath, ['--import', 'tsx', join(HERE, 'support', 'cancel-client.ts'), url], {
      cwd: ROOT,
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    let markReady: () => void = () => undefined;
    let fail: (error: Error) => void = () => undefined;
    this.ready = new Promise<void>((resolve, reject) => {
      markReady = resolve;
      fail = reject;
    });
    this.#child.once('error', (error) => fail(error));
    this.#child.once('exit', (code, signal) => fail(new BenchFailure(`cancel client exited (${code ?? signal})`)));
    createInterface({ input: this.#child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
      let reply: Record<string, unknown>;
      try {
        reply = JSON.parse(line) as Record<string, unknown>;
      } catch {
        return;
      }
      if (reply.ready === true) return markReady();
      const key = typeof reply.sessionId === 'string' ? reply.sessionId : '';
      const waiter = this.#waiting.get(key);
      this.#waiting.delete(key);
      waiter?.(reply);
    });
  }

  get pid(): number | undefined {
    return this.#child.pid;
  }

  request(prefix: string, sessionId: string, warm = false): Promise<Record<string, unknown>> {
    const key = sessionId;
    const reply = new Promise<Record<string, unknown>>((resolve) => this.#waiting.set(key, resolve));
    this.#child.stdin?.write(`${JSON.stringify({ prefix, sessionId, ...(warm ? { warm: true } : {}) })}\n`);
    return reply;
  }

  async stop(): Promise<void> {
    if (this.#child.exitCode !== null || this.#child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => this.#child.once('exit', () => resolve()));
    this.#child.stdin?.end();
    const timer = setTimeout(() => this.#child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  }
}

export interface CancelSample {
  /** cancel() called (client's clock) → the `cancelled` transition (worker's clock; same host). */
  transitionMs: number;
  /** cancel() called → this process's getSession poll first saw `cancelled` (± POLL_MS). */
  observedMs: number;
  /** cancel() called → cancel() returned, in the client. */
  callMs: number;
  /** With BENCH_CANCEL_STAGES=1: cancel() called → each stage, first seen after the call (ms). */
  stagesMs?: Partial<Record<(typeof STAGE_ORDER)[number], number>>;
}

async function pollSession(
  runtime: Runtime,
  sessionId: string,
  until: (view: SessionRecord) => boolean,
  timeoutMs: number,
  what: string,
): Promise<SessionRecord> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const view = await runtime.getSession(sessionId);
    if (view !== null && until(view)) return view;
    if (view !== null && view.state === 'failed') {
      const last = (await runtime.readMessages(sessionId, Math.max(1, view.lastSeq), 1))[0];
      throw new BenchFailure(
        `${sessionId} failed while waiting for ${what}: ${JSON.stringify(last?.content ?? null).slice(0, 400)}`,
      );
    }
    if (Date.now() > deadline)
      throw new BenchFailure(
        `timed out after ${timeoutMs} ms waiting for ${what} (state ${view?.state ?? 'none'}, lastSeq ${view?.lastSeq ?? '-'})`,
      );
    await sleep(POLL_MS);
  }
}

export async function cancelRun(
  ctx: Ctx,
  client: CancelClient,
  mode: 'cooperative' | 'stubborn',
  fakePi: string,
  dirs: { agentDir: string; stateDir: string },
): Promise<CancelSample[]> {
  const side = await sessionSide(ctx, `cancel-${mode}`, {
    pi: {
      command: fakePi,
      agentDir: dirs.agentDir,
      env: { SESSIOND_STATE_DIR: dirs.stateDir },
      extraArgs: mode === 'stubborn' ? ['--hang', '--stubborn'] : ['--hang'],
    },
  });
  await client.request(side.prefix, 'warm-up', true);
  const total = mode === 'cooperative' ? COOPERATIVE_SAMPLES : STUBBORN_SAMPLES;
  const batch = mode === 'cooperative' ? COOPERATIVE_BATCH : STUBBORN_BATCH;
  const samples: CancelSample[] = [];
  const seen: CancelStageEvent[] = [];
  const onStage = (event: unknown): void => void seen.push(event as CancelStageEvent);
  if (CANCEL_STAGES) subscribe(CANCEL_STAGES_CHANNEL, onStage);
  const stagesOf = (sessionId: string, calledAt: number, observedAt: number): CancelSample['stagesMs'] => {
    const stages: NonNullable<CancelSample['stagesMs']> = { observed: observedAt - calledAt };
    for (const { key, stage, at } of seen) {
      if ((key === sessionId || key.endsWith(`.${sessionId}`)) && at >= calledAt && stages[stage] === undefined)
        stages[stage] = Math.round((at - calledAt) * 10) / 10;
    }
    return stages;
  };

  const measure = async (sessionId: string): Promise<CancelSample> => {
    const reply = client.request(side.prefix, sessionId);
    const view = await pollSession(
      side.runtime,
      sessionId,
      (v) => v.state === 'cancelled',
      ctx.deadline.cap(20_000),
      `${sessionId} cancelled`,
    );
    const observedAt = Date.now();
    const r = await withTimeout(reply, ctx.deadline.cap(10_000), `cancel reply for ${sessionId}`);
    if (typeof r.error === 'string') throw new BenchFailure(`cancel ${sessionId}: ${r.error}`);
    if (r.delivered !== 'worker')
      throw new BenchFailure(
        `cancel ${sessionId}: delivered "${String(r.delivered)}", expected "worker" (the session was running)`,
      );
    const calledAt = Number(r.calledAt);
    const transition = view.history.findLast((h) => h.to === 'cancelled');
    if (transition === undefined) throw new BenchFailure(`${sessionId}: no "cancelled" transition in the history`);
    const kept = await side.runtime.readMessages(sessionId, 1, 100);
    if (!kept.some((m) => m.type === 'session.started') || !kept.some((m) => m.type === 'assistant')) {
      throw new BenchFailure(
        `${sessionId}: the partial output did not stay in the log (${kept.map((m) => m.type).join(', ')})`,
      );
    }
    return {
      transitionMs: transition.at - calledAt,
      observedMs: observedAt - calledAt,
      callMs: Number(r.returnedAt) - calledAt,
      ...(CANCEL_STAGES ? { stagesMs: stagesOf(sessionId, calledAt, observedAt) } : {}),
    };
  };

  // One untimed sample first, alone. Besides warming up, it makes the first attempt write pi's
  // managed settings.json (src/agents/pi/home.ts) before attempts start concurrently: two
  // attempts of one worker that start in the same millisecond use the same temp file name there,
  // and one of them fails with ENOENT on rename (a `startup` failure). Later attempts find the file
  // as they would write it and do not write it again.
  await side.runtime.enqueue({ sessionId: 'warm-up-0', prompt: PROMPT });
  await pollSession(
    side.runtime,
    'warm-up-0',
    (v) => v.state === 'running' && v.lastSeq >= 2,
    ctx.deadline.cap(30_000),
    'warm-up session running with output',
  );
  await measure('warm-up-0');

  for (let b = 0; samples.length < total; b += 1) {
    const ids = sessionIds(Math.min(batch, total - samples.length)).map((id) => `${id}-b${b}`);
    for (const sessionId of ids) await side.runtime.enqueue({ sessionId, prompt: PROMPT });
    // Every agent is up and has printed its first lines (they are in the log) before any cancel.
    for (const sessionId of ids) {
      await pollSession(
        side.runtime,
        sessionId,
        (v) => v.state === 'running' && v.lastSeq >= 2,
        ctx.deadline.cap(30_000),
        `${sessionId} running with output`,
      );
    }
    await sleep(100);
    if (mode === 'cooperative') {
      for (const sessionId of ids) samples.push(await measure(sessionId));
    } else {
      samples.push(
        ...(await Promise.all(
          ids.map(async (sessionId, i) => {
            await sleep(i * STUBBORN_STAGGER_MS);
            return measure(sessionId);
          }),
        )),
      );
    }
  }
  if (CANCEL_STAGES) unsubscribe(CANCEL_STAGES_CHANNEL, onStage);
  // The worker gave every session back (nothing left running) and no fake agent survived.
  await withTimeout(
    (async () => {
      while (side.worker.activeSessions.length > 0) await sleep(20);
    })(),
    ctx.deadline.cap(10_000),
    `${mode}: worker releasing its sessions`,
  );
  const survivors = processesMentioning(fakePi);
  if (survivors.length > 0)
    throw new BenchFailure(
      `${mode}: ${survivors.length} fake agent processes still alive after their turns were cancelled: ${survivors.join(', ')}`,
    );
  if (side.problems.length > 0)
    throw new BenchFailure(`${mode} worker reported problems:\n  ${side.problems.slice(0, 5).join('\n  ')}`);
  await side.close();
  return samples;
}

/** Each step from one stage of a cancel to the next (cancel() called first): p50 / p90 over the samples, ms. */
function stageBreakdown(samples: readonly CancelSample[]): string {
  let previous = 'called';
  const steps: string[] = [];
  for (const stage of STAGE_ORDER) {
    const deltas = samples.flatMap((s) => {
      const at = s.stagesMs?.[stage];
      const from = previous === 'called' ? 0 : s.stagesMs?.[previous as (typeof STAGE_ORDER)[number]];
      return at === undefined || from === undefined ? [] : [at - from];
    });
    steps.push(`${previous}→${stage} ${percentile(deltas, 50).toFixed(1)}/${percentile(deltas, 90).toFixed(1)}`);
    previous = stage;
  }
  const slowest = samples.reduce<CancelSample | undefined>(
    (a, b) => (a === undefined || (b.stagesMs?.observed ?? 0) > (a.stagesMs?.observed ?? 0) ? b : a),
    undefined,
  );
  return `stages, p50/p90 ms: ${steps.join(', ')}; slowest sample, ms after cancel(): ${JSON.stringify(slowest?.stagesMs ?? {})}`;
}

// ---------------------------------------------------------------- the run

export async function run(log: (line: string) => void = console.log): Promise<Record<string, unknown>> {
  return bounded('queue', TIME_LIMIT_MS, log, (cleanup, deadline) => measureAll(log, cleanup, deadline));
}

async function measureAll(
  log: (line: string) => void,
  cleanup: Cleanup,
  deadline: Deadline,
): Promise<Record<string, unknown>> {
  const redis: RedisServer = await startRedis();
  cleanup.add('redis-server', () => redis.stop());
  const ctx: Ctx = {
    url: redis.url,
    redisPid: redis.pid,
    runId: randomBytes(3).toString('hex'),
    deadline,
    cleanup,
    log,
  };
  fakeAgent.install();
  log(
    `one redis-server (AOF off) on port ${redis.port}; worker concurrency ${CONCURRENCY}, producer ${PRODUCER_IN_FLIGHT} calls in flight, all in this process`,
  );

  let sessionsPerSec = Number.NaN;
  let baselineJobsPerSec = Number.NaN;
  let ratio = Number.NaN;
  if (PARTS.has('1')) {
    // ---- 1. sessions vs bare jobs
    log(
      `1. ${SESSIONS} sessions × 1 turn × ${MESSAGES_PER_TURN} messages (in-process fake agent), enqueue → worker → persist, vs ${SESSIONS} bare BullMQ jobs (no-op processor)`,
    );
    await runBaseline(ctx, WARMUP_SESSIONS);
    await runSessions(ctx, WARMUP_SESSIONS, MESSAGES_PER_TURN);
    const sessionRuns: Throughput[] = [];
    const baselineRuns: Throughput[] = [];
    for (let rep = 0; rep < REPETITIONS; rep += 1) {
      // Alternate which side goes first.
      if (rep % 2 === 0) {
        baselineRuns.push(await runBaseline(ctx, SESSIONS));
        sessionRuns.push(await runSessions(ctx, SESSIONS, MESSAGES_PER_TURN));
      } else {
        sessionRuns.push(await runSessions(ctx, SESSIONS, MESSAGES_PER_TURN));
        baselineRuns.push(await runBaseline(ctx, SESSIONS));
      }
    }
    const fmt = (runs: Throughput[]): string =>
      runs.map((r) => `${r.perSec.toFixed(0)}/s (${(r.wallMs / 1000).toFixed(2)} s)`).join(', ');
    log(`  runs after a warm-up of ${WARMUP_SESSIONS}: bare BullMQ ${fmt(baselineRuns)}`);
    log(`                                  sessions    ${fmt(sessionRuns)}`);
    sessionsPerSec = median(sessionRuns.map((r) => r.perSec));
    baselineJobsPerSec = median(baselineRuns.map((r) => r.perSec));
    ratio = sessionsPerSec / baselineJobsPerSec;
    log(
      `  median: ${sessionsPerSec.toFixed(1)} sessions/s (${(sessionsPerSec * MESSAGES_PER_TURN).toFixed(0)} messages/s) vs ${baselineJobsPerSec.toFixed(1)} bare jobs/s`,
    );
    log(
      `  ratio ${ratio.toFixed(3)} (target ≥ ${TARGET_RATIO}): ${ratio >= TARGET_RATIO ? 'ok' : 'BELOW TARGET'}; every session checked: completed, ${MESSAGES_PER_TURN} messages with seq 1..${MESSAGES_PER_TURN}`,
    );
    const cpuOf = (runs: Throughput[]) => ({
      node: median(runs.map((r) => r.nodeCpuUs)),
      redis: median(runs.map((r) => r.redisCpuUs)),
    });
    const [sc, bc] = [cpuOf(sessionRuns), cpuOf(baselineRuns)];
    log(
      `  cross-check, CPU per item (median): session ${sc.node.toFixed(0)} µs here + ${sc.redis.toFixed(0)} µs redis-server, bare job ${bc.node.toFixed(0)} µs + ${bc.redis.toFixed(0)} µs; ` +
        `CPU ratio bare/session ${(bc.node / sc.node).toFixed(3)} here, ${((bc.node + bc.redis) / (sc.node + sc.redis)).toFixed(3)} with redis`,
    );
    const preSessions = await runSessions(ctx, SESSIONS, MESSAGES_PER_TURN, true);
    const preBaseline = await runBaseline(ctx, SESSIONS, true);
    log(
      `  (informational) all enqueued first, worker alone timed: sessions ${preSessions.perSec.toFixed(1)}/s, bare jobs ${preBaseline.perSec.toFixed(1)}/s, ratio ${(preSessions.perSec / preBaseline.perSec).toFixed(3)}`,
    );
  }

  let messagesPerSec = Number.NaN;
  if (PARTS.has('2')) {
    // ---- 2. long turns
    log(`2. ${LONG_SESSIONS} sessions × 1 turn × ${LONG_MESSAGES} messages, enqueue → worker → persist`);
    await runSessions(ctx, 8, LONG_MESSAGES);
    const long = await runSessions(ctx, LONG_SESSIONS, LONG_MESSAGES);
    messagesPerSec = (LONG_SESSIONS * LONG_MESSAGES) / (long.wallMs / 1000);
    log(
      `  ${(LONG_SESSIONS * LONG_MESSAGES).toLocaleString('en-US')} messages persisted in ${(long.wallMs / 1000).toFixed(2)} s: ${messagesPerSec.toFixed(0)} messages/s; all ${LONG_SESSIONS} logs checked (XLEN), 3 read back in full`,
    );
  }

  const results: Record<string, { p50: number; p99: number; samples: number[] }> = {};
  if (PARTS.has('3')) {
    // ---- 3. cancel latency
    log(
      `3. cancel() from another process → the turn's "cancelled" transition, fake pi as a real child process (${COOPERATIVE_SAMPLES} + ${STUBBORN_SAMPLES} samples)`,
    );
    const fakes = writeFakeAgents(tempDir('sessiond-bench-', cleanup), MESSAGES_PER_TURN);
    const fakePi = fakes.nodeTurn;
    const dirs = { agentDir: fakes.agentDir, stateDir: fakes.stateDir };
    const client = new CancelClient(ctx.url);
    cleanup.add('cancel client', () => client.stop());
    await withTimeout(client.ready, deadline.cap(60_000), 'the cancel client to start');
    for (const mode of ['cooperative', 'stubborn'] as const) {
      const samples = await cancelRun(ctx, client, mode, fakePi, dirs);
      const t = samples.map((s) => s.transitionMs);
      const o = samples.map((s) => s.observedMs);
      const c = samples.map((s) => s.callMs);
      results[mode] = { p50: percentile(t, 50), p99: percentile(t, 99), samples: t };
      const describe = mode === 'cooperative' ? 'exits on SIGTERM' : 'ignores SIGINT/SIGTERM, SIGKILL stage';
      log(
        `  ${mode.padEnd(11)} (${describe}, ${samples.length} samples${mode === 'stubborn' ? `, ${STUBBORN_BATCH} at a time ${STUBBORN_STAGGER_MS} ms apart` : ', one at a time'}): ` +
          `p50 ${percentile(t, 50)} ms, p99 ${percentile(t, 99)} ms, max ${Math.max(...t)} ms; ` +
          `seen by getSession p50 ${percentile(o, 50)} ms, p99 ${percentile(o, 99)} ms; cancel() call p50 ${percentile(c, 50)} ms`,
      );
      if (CANCEL_STAGES) log(`    ${stageBreakdown(samples)}`);
    }
    log(
      `  checked: every cancel delivered to the holding worker, the partial output kept in the log, no fake agent process left`,
    );
  }

  return {
    bench: name,
    sessionsPerSec: orNull(round(sessionsPerSec, 1)),
    baselineJobsPerSec: orNull(round(baselineJobsPerSec, 1)),
    ratio: orNull(round(ratio, 3)),
    messagesPerSec: orNull(round(messagesPerSec, 0)),
    cancelP99Ms: results.cooperative?.p99 ?? null,
    cancelStubbornP99Ms: results.stubborn?.p99 ?? null,
    // Every sample (cancel() → the "cancelled" transition, ms), for plots (scripts/plot-bench.ts).
    cancelSamplesMs: results.cooperative?.samples ?? null,
    cancelStubbornSamplesMs: results.stubborn?.samples ?? null,
  };
}
