import { performance } from 'node:perf_hooks';
import { type Job } from 'bullmq';
import { createKeys } from '../../src/runtime/keys.ts';
import { Runtime } from '../../src/runtime/runtime.ts';
import { SessionStore } from '../../src/runtime/store/session-store.ts';
import { startRedis } from '../../test/support/redis.ts';
import * as fakeAgent from './fake-agent.ts';
import { PROMPT } from './fleet.ts';
import { pool, procCpuMs, withTimeout } from './harness.ts';
import { median } from './timing.ts';
import { bareWorker, benchWorker, connector } from './worker.ts';
import { internals } from '../../src/runtime/internals.ts';

/**
 * `node --import tsx bench/support/queue-floor.ts [sessions]` — not part of
 * `npm run bench`: a diagnostic for the queue benchmark's ratio. Where does a
 * session's CPU go on the worker side? The sessions are enqueued first (as in
 * the benchmark, by `Runtime.enqueue`); then a worker takes their activation
 * jobs, concurrency 8, and only the worker is measured — this process's CPU
 * and redis-server's, per session — for four processors of growing scope:
 *
 * - `bare job`: BullMQ's own cost, a no-op processor;
 * - `+ lease`: the acquire script (lease, fence, everything needed to restore)
 *   and a last write that gives the lease back — the Redis work a session
 *   cannot do without;
 * - `+ 1 write`: the least any durable design could write for a turn: one
 *   last write with the 20 messages, a snapshot and the transitions, that
 *   also gives the lease back (payloads of the real sizes);
 * - `+ writes`: the two writes a turn makes here (the `running` snapshot
 *   before the agent starts, so that a crash leaves the attempt recorded,
 *   then the last one);
 * - `session`: the real SessionWorker driving each session with the
 *   in-process fake agent of the queue benchmark (restore, session actor,
 *   attempt, 20 messages, every transition persisted, release).
 *
 * Median of ROUNDS rounds after a warm-up round, each mode in a fresh process
 * state order (modes alternate within a round). The difference between two
 * lines is what that layer costs.
 */

const N = Number(process.argv[2] ?? 3000);
const ROUNDS = 5;
const CONCURRENCY = 8;
const MESSAGES = 20;
const MODES = ['bare job', '+ lease', '+ 1 write', '+ writes', 'session'] as const;
type Mode = (typeof MODES)[number];

const server = await startRedis();
const { connect, closeAll } = connector(server.url);

const redisCpuMs = (): number => procCpuMs(server.pid).ownMs;

const messages = Array.from({ length: MESSAGES }, (_, i) => ({
  turn: 1,
  attempt: 1,
  type: 'assistant',
  content: JSON.stringify({ text: `the writer batches every message ${i}` }),
}));
/** The sizes of a real turn's snapshots and transitions (~1 KB each snapshot). */
const snapshot = (state: string): string =>
  JSON.stringify({
    version: 1,
    snapshot: { status: 'active', value: state, context: { padding: 'x'.repeat(900) }, children: {} },
  });
const transition = (from: string, to: string, event: string): string =>
  JSON.stringify({ at: Date.now(), from, to, event });

/** A BullMQ processor for the modes below `session`. */
function processor(mode: Mode, store: SessionStore): (job: Job) => Promise<string> {
  return async (job) => {
    if (mode === 'bare job') return 'done';
    const sessionId = (job.data as { sessionId: string }).sessionId;
    const lease = await store.acquire(sessionId, 'floor-worker', 30_000);
    if (!lease.ok) throw new Error(`${sessionId}: no lease (${lease.reason})`);
    if (mode === '+ lease') {
      await store.write(sessionId, lease.token, { inboxTrim: 1, release: 'idle' });
      return 'done';
    }
    const last = {
      snapshot: snapshot('completed'),
      state: 'completed',
      history: [transition('running', 'completed', 'attempt.ended')],
      messages,
      release: 'idle' as const,
    };
    if (mode === '+ 1 write') {
      await store.write(sessionId, lease.token, {
        ...last,
        writeId: 1,
        inboxTrim: 1,
        history: [transition('idle', 'running', 'session.prompt'), ...last.history],
      });
      return 'done';
    }
    await store.write(sessionId, lease.token, {
      writeId: 1,
      snapshot: snapshot('running'),
      state: 'running',
      inboxTrim: 1,
      history: [transition('idle', 'running', 'session.prompt')],
    });
    await store.write(sessionId, lease.token, { ...last, writeId: 2 });
    return 'done';
  };
}

let round = 0;
/** µs of this process's and of redis-server's CPU per session, for one mode. */
async function measure(mode: Mode): Promise<{ nodeUs: number; redisUs: number; perSec: number }> {
  round += 1;
  const prefix = `floor-${round}`;
  const keys = createKeys(prefix);
  const runtime = new Runtime({ connect, prefix });
  await internals(runtime).redis.ping();
  await internals(runtime).queue.queue.waitUntilReady();
  const ids = Array.from({ length: N }, (_, i) => `s${i}`);
  await pool(ids, 16, (sessionId) =>
    runtime.enqueue({ sessionId, prompt: PROMPT, options: fakeAgent.fakeTurnOptions() }),
  );
  let count = 0;
  let allDone: () => void = () => undefined;
  let fail: (error: Error) => void = () => undefined;
  const done = new Promise<void>((resolve, reject) => {
    allDone = resolve;
    fail = reject;
  });
  const one = (): void => {
    count += 1;
    if (count === N) allDone();
  };
  const cpu = process.cpuUsage();
  const redis = redisCpuMs();
  const start = performance.now();
  let close: () => Promise<void>;
  if (mode === 'session') {
    const worker = benchWorker(connect, keys, {
      concurrency: CONCURRENCY,
      agentOptions: fakeAgent.fakeHostOptions({ messages: MESSAGES }),
      log: (_level, message) => {
        if (message === 'session released') one();
      },
    });
    await worker.start();
    close = () => worker.close(2000);
  } else {
    const worker = bareWorker(
      connect,
      keys.queuePrefix,
      CONCURRENCY,
      processor(mode, new SessionStore(connect('floor-store'), keys)),
    );
    worker.on('completed', one);
    worker.on('failed', (job, error) => fail(new Error(`${mode}: job ${job?.id ?? '?'} failed: ${error.message}`)));
    await worker.waitUntilReady();
    close = () => worker.close();
  }
  await withTimeout(done, 120_000, `${mode}: ${N} sessions (${count} so far)`);
  const wallMs = performance.now() - start;
  const used = process.cpuUsage(cpu);
  const redisMs = redisCpuMs() - redis;
  await close();
  await runtime.close();
  return { nodeUs: (used.user + used.system) / N, redisUs: (redisMs * 1000) / N, perSec: N / (wallMs / 1000) };
}

fakeAgent.install();
try {
  for (const mode of MODES) await measure(mode); // warm-up
  const results = new Map<Mode, Array<{ nodeUs: number; redisUs: number; perSec: number }>>(MODES.map((m) => [m, []]));
  for (let r = 0; r < ROUNDS; r += 1) {
    const order = r % 2 === 0 ? MODES : [...MODES].reverse();
    for (const mode of order) results.get(mode)?.push(await measure(mode));
  }
  console.log(
    `worker side only, ${N} sessions enqueued first, concurrency ${CONCURRENCY}; median of ${ROUNDS} rounds after a warm-up (µs of CPU per session)`,
  );
  const summary: Record<string, { nodeUs: number; redisUs: number; perSec: number }> = {};
  for (const mode of MODES) {
    const runs = results.get(mode) ?? [];
    const row = {
      nodeUs: median(runs.map((x) => x.nodeUs)),
      redisUs: median(runs.map((x) => x.redisUs)),
      perSec: median(runs.map((x) => x.perSec)),
    };
    summary[mode] = row;
    console.log(
      `  ${mode.padEnd(10)} ${row.nodeUs.toFixed(0).padStart(5)} µs here (runs ${runs.map((x) => x.nodeUs.toFixed(0)).join(', ')}), ` +
        `${row.redisUs.toFixed(0).padStart(4)} µs redis-server, ${row.perSec.toFixed(0).padStart(6)} /s`,
    );
  }
  console.log(JSON.stringify({ diagnostic: 'queue-floor', sessions: N, concurrency: CONCURRENCY, ...summary }));
} finally {
  closeAll();
  await server.stop();
}
process.exit(0);
