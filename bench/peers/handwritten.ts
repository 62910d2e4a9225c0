import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Queue, Worker, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { createActor, createMachine } from 'xstate';
import type { StoredMessage } from '../../src/runtime/store/session-store.ts';
import { BenchFailure } from '../support/benchmark.ts';
import type { FakeAgents } from '../support/fake-agents.ts';
import { countStall, type StallCount } from './log-checks.ts';
import { Fleet, PRODUCER_IN_FLIGHT, PROMPT, sessionIds } from '../support/fleet.ts';
import { pool, sleep, withTimeout, type Cleanup, type Deadline } from '../support/harness.ts';
import { median, round } from '../support/timing.ts';
import { WorkerProcess } from '../support/worker-process.ts';

/**
 * "What a user writes by hand" for the peers benchmark: a BullMQ job per prompt whose processor runs
 * an XState actor for the turn (idle → running → completed) and appends each agent message to a
 * Redis list (RPUSH, awaited, before the next message), then stores the actor's final state. No lease,
 * no fencing token: BullMQ's job lock is the only guard.
 *
 * - Throughput: sessions/s with the in-process fake (the same 20 messages), at the same concurrency.
 * - Double delivery: STALL_SESSIONS turns running on worker process A (a turn: a message every
 *   STALL_EVERY_MS), worker B started beside it; A is stopped (SIGSTOP: a VM pause, a long GC, a
 *   swapped-out host) for STALL_MS, longer than its job lock; BullMQ's stalled-job check moves the jobs
 *   back and B runs them again; then A is continued and goes on writing. Counted: turns whose agent
 *   ran on both workers, turns completed twice, messages written by a worker after another one had
 *   taken the turn over (stale writes), messages beyond one turn. The same stall on sessiond (two
 *   worker processes, lease TTL shortened to STALL_LEASE so that it expires within the stall).
 */
export const HANDWRITTEN_QUEUE = 'handwritten-turns';

const STALL_SESSIONS = 4;
const STALL_MESSAGES = 30;
const STALL_EVERY_MS = 100;
const STALL_MS = 5000;
const STALL_LEASE = '2s';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..', '..');
const DELTAS = [
  'Looking at the session store, ',
  'the writer batches every ',
  'message of a transition ',
  'into one fenced Lua call; ',
  'the lease is checked first. ',
];

const turnMachine = createMachine({
  id: 'turn',
  initial: 'idle',
  states: {
    idle: { on: { PROMPT: 'running' } },
    running: { on: { MESSAGE: 'running', DONE: 'completed', FAIL: 'failed' } },
    completed: { type: 'final' },
    failed: { type: 'final' },
  },
});

interface ListEntry {
  type: string;
  content: unknown;
  /** Which processor run wrote it (worker and run id). */
  run: string;
}

/** The processor: one turn of the fake agent (`every` ms between messages; 0: all at once). */
export function handwrittenProcessor(
  redis: Redis,
  prefix: string,
  messages: number,
  every: number,
  who: string,
): (job: Job) => Promise<string> {
  return async (job) => {
    const { sessionId } = job.data as { sessionId: string };
    const run = `${who}:${randomUUID().slice(0, 8)}`;
    const actor = createActor(turnMachine).start();
    actor.send({ type: 'PROMPT' });
    const list = `${prefix}:log:${sessionId}`;
    const emit = async (type: string, content: unknown): Promise<void> => {
      actor.send({ type: 'MESSAGE' });
      await redis.rpush(list, JSON.stringify({ type, content, run }));
      if (every > 0) await sleep(every);
    };
    const deltas = Math.max(0, messages - 2);
    await emit('session.started', { sessionId: `fake-${deltas}` });
    for (let i = 0; i < deltas; i += 1) await emit('assistant', { text: DELTAS[i % DELTAS.length] });
    await emit('terminal.completed', { stopReason: 'stop' });
    actor.send({ type: 'DONE' });
    await redis.set(`${prefix}:state:${sessionId}`, String(actor.getSnapshot().value));
    actor.stop();
    return 'done';
  };
}

export interface HandwrittenResult {
  sessionsPerSec: number | null;
  stall: { handwritten: StallCount; sessiond: StallCount };
}

export interface HandwrittenOptions {
  url: string;
  redis: Redis;
  runId: string;
  cleanup: Cleanup;
  deadline: Deadline;
  log: (line: string) => void;
  sessions: number;
  messages: number;
  concurrency: number;
  fakes: FakeAgents;
}

async function throughput(o: HandwrittenOptions, prefix: string, n: number): Promise<number> {
  const connection = new Redis(o.url, { maxRetriesPerRequest: null });
  const workerConnection = new Redis(o.url, { maxRetriesPerRequest: null });
  const queue = new Queue(HANDWRITTEN_QUEUE, { connection, prefix });
  const worker = new Worker(HANDWRITTEN_QUEUE, handwrittenProcessor(o.redis, prefix, o.messages, 0, 'inproc'), {
    connection: workerConnection,
    prefix,
    concurrency: o.concurrency,
  });
  worker.on('error', () => undefined);
  let completed = 0;
  let failed = 0;
  let allDone: () => void = () => undefined;
  const done = new Promise<void>((resolve) => (allDone = resolve));
  worker.on('completed', () => {
    completed += 1;
    if (completed === n) allDone();
  });
  worker.on('failed', () => (failed += 1));
  await worker.waitUntilReady();
  const start = performance.now();
  await pool(sessionIds(n, 'hw'), PRODUCER_IN_FLIGHT, (sessionId) =>
    queue.add('turn', { sessionId, prompt: PROMPT }, { removeOnComplete: true, removeOnFail: 1000 }),
  );
  await withTimeout(done, o.deadline.cap(60_000), `${n} hand-written turns (${completed} so far)`);
  const wallMs = performance.now() - start;
  await worker.close();
  await queue.close();
  connection.disconnect();
  workerConnection.disconnect();
  if (failed > 0) throw new BenchFailure(`hand-written: ${failed} jobs failed`);
  const len = await o.redis.llen(`${prefix}:log:hw-0`);
  if (len !== o.messages) throw new BenchFailure(`hand-written: hw-0 has ${len} messages, expected ${o.messages}`);
  return n / (wallMs / 1000);
}

function startHandWorker(o: HandwrittenOptions, prefix: string): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      join(HERE, 'handwritten-worker.ts'),
      o.url,
      prefix,
      String(STALL_MESSAGES),
      String(STALL_EVERY_MS),
    ],
    {
      cwd: ROOT,
      stdio: ['pipe', 'pipe', 'inherit'],
    },
  );
  o.cleanup.add(`hand-written worker ${child.pid ?? '?'}`, async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGCONT');
    child.kill('SIGKILL');
    await new Promise((resolve) => child.once('exit', resolve));
  });
  return withTimeout(
    new Promise<ChildProcess>((resolve, reject) => {
      createInterface({ input: child.stdout as NodeJS.ReadableStream }).on(
        'line',
        (line) => line === 'ready' && resolve(child),
      );
      child.once('exit', (code) => reject(new BenchFailure(`hand-written worker exited (${code})`)));
    }),
    60_000,
    'a hand-written worker to start',
  );
}

/** Waits until none of `lengths()` changed for `quietMs`. */
async function settle(lengths: () => Promise<number[]>, quietMs: number, deadline: Deadline): Promise<void> {
  let last = '';
  let since = Date.now();
  await withTimeout(
    (async () => {
      for (;;) {
        const now = JSON.stringify(await lengths());
        if (now !== last) {
          last = now;
          since = Date.now();
        } else if (Date.now() - since >= quietMs) return;
        await sleep(100);
      }
    })(),
    deadline.cap(60_000),
    'the logs to stop growing',
  );
}

async function handStall(o: HandwrittenOptions, prefix: string): Promise<StallCount> {
  const ids = sessionIds(STALL_SESSIONS, 'stall');
  const a = await startHandWorker(o, prefix);
  const connection = new Redis(o.url, { maxRetriesPerRequest: null });
  const queue = new Queue(HANDWRITTEN_QUEUE, { connection, prefix });
  for (const sessionId of ids) await queue.add('turn', { sessionId, prompt: PROMPT });
  const lists = ids.map((id) => `${prefix}:log:${id}`);
  while ((await Promise.all(lists.map((l) => o.redis.llen(l)))).some((n) => n < 3)) await sleep(20);
  const b = await startHandWorker(o, prefix);
  a.kill('SIGSTOP');
  await sleep(STALL_MS);
  a.kill('SIGCONT');
  await settle(() => Promise.all(lists.map((l) => o.redis.llen(l))), 2000, o.deadline);
  const logs = await Promise.all(
    lists.map(async (l) =>
      (await o.redis.lrange(l, 0, -1)).map((s) => JSON.parse(s) as ListEntry).map((m) => ({ type: m.type, by: m.run })),
    ),
  );
  await queue.close();
  connection.disconnect();
  for (const w of [a, b]) w.stdin?.end();
  return countStall(logs, STALL_MESSAGES);
}

async function sessiondStall(o: HandwrittenOptions, prefix: string, cleanup: Cleanup): Promise<StallCount> {
  const options = {
    url: o.url,
    prefix,
    concurrency: o.concurrency,
    piCommand: o.fakes.nodeTurn,
    piArgs: ['--messages', String(STALL_MESSAGES), '--every', String(STALL_EVERY_MS)],
    stateDir: o.fakes.stateDir,
    agentDir: o.fakes.agentDir,
    env: { SESSIOND_LEASE_TTL: STALL_LEASE, SESSIOND_HEARTBEAT: '500ms', SESSIOND_STALLED_INTERVAL: '1s' },
  };
  const fleet = await Fleet.start({ workers: 1, ...options }, 0, cleanup, o.deadline);
  const ids = sessionIds(STALL_SESSIONS, 'stall');
  for (const sessionId of ids) await fleet.runtime.enqueue({ sessionId, prompt: PROMPT });
  for (const id of ids) {
    for (;;) {
      const view = await fleet.runtime.getSession(id);
      if (view !== null && view.lastSeq >= 3) break;
      await sleep(20);
    }
  }
  const a = fleet.workers[0];
  if (a === undefined) throw new BenchFailure('no worker');
  await WorkerProcess.start(options, cleanup);
  process.kill(a.pid, 'SIGSTOP');
  await sleep(STALL_MS);
  process.kill(a.pid, 'SIGCONT');
  await withTimeout(
    (async () => {
      for (;;) {
        const states = await fleet.runtime.sessionStates(ids);
        if (ids.every((id) => states[id] === 'completed' || states[id] === 'failed')) return;
        await sleep(50);
      }
    })(),
    o.deadline.cap(90_000),
    'sessiond sessions to complete after the stall',
  );
  const read = (id: string): Promise<StoredMessage[]> => fleet.runtime.readMessages(id, 1, 1000);
  await settle(async () => (await Promise.all(ids.map(read))).map((l) => l.length), 2000, o.deadline);
  const logs = await Promise.all(
    ids.map(async (id) => (await read(id)).map((m) => ({ type: m.type, by: `attempt ${m.attempt}` }))),
  );
  await fleet.close();
  return countStall(logs, STALL_MESSAGES);
}

export async function runHandwritten(o: HandwrittenOptions): Promise<HandwrittenResult> {
  const base = `bench-${o.runId}-hand`;
  await throughput(o, `${base}-warm`, Math.min(o.sessions, 1000));
  const rates: number[] = [];
  for (let rep = 0; rep < 3; rep += 1) rates.push(await throughput(o, `${base}-${rep}`, o.sessions));
  const perSec = median(rates);
  o.log(
    `  by hand: ${rates.map((r) => `${r.toFixed(1)}/s`).join(', ')} sessions/s (in-process fake, ${o.messages} messages, concurrency ${o.concurrency})`,
  );
  const hand = await handStall(o, `${base}-stall`);
  const sessiond = await sessiondStall(o, `${base}-sd-stall`, o.cleanup);
  const line = (c: StallCount): string =>
    `${c.ranTwice}/${c.turns} turns ran on both workers, ${c.completedTwice} completed twice, ${c.staleWrites} stale writes (after the other worker took over), ${c.extraMessages} messages beyond one turn each`;
  o.log(`  stalled worker (SIGSTOP ${STALL_MS / 1000} s, longer than the job lock / lease): by hand ${line(hand)}`);
  o.log(`                                                                  sessiond ${line(sessiond)}`);
  return { sessionsPerSec: round(perSec, 1), stall: { handwritten: hand, sessiond } };
}
