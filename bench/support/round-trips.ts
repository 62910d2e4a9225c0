import { randomUUID } from 'node:crypto';
import { Queue } from 'bullmq';
import { createKeys } from '../../src/runtime/keys.ts';
import { ACTIVATION_JOB, JOB_OPTIONS, QUEUE_NAME } from '../../src/runtime/queue.ts';
import { Runtime } from '../../src/runtime/runtime.ts';
import { startRedis } from '../../test/support/redis.ts';
import * as fakeAgent from './fake-agent.ts';
import { PROMPT } from './fleet.ts';
import { pool, withTimeout } from './harness.ts';
import { bareWorker, benchWorker, connector } from './worker.ts';
import { internals } from '../../src/runtime/internals.ts';

/**
 * `node --import tsx bench/support/round-trips.ts [sessions]` — not part of
 * `npm run bench`: a diagnostic for the queue benchmark's ratio. Runs the
 * queue benchmark's two sides once each, in this process, on a fresh
 * redis-server watched with MONITOR, and counts the Redis commands per item:
 * sent by a client (each one a round trip unless pipelined) and run inside
 * Lua scripts, by connection and by command.
 * - session: one prompt (Runtime.enqueue) → SessionWorker (concurrency 8) →
 *   the in-process fake agent's 20 messages persisted → released;
 * - bare job: Queue.add → a BullMQ Worker with a no-op processor.
 * MONITOR slows Redis down: only the counts mean something here, not the time.
 */

const N = Number(process.argv[2] ?? 200);
const CONCURRENCY = 8;
const MESSAGES = 20;

interface Counts {
  client: Map<string, number>;
  lua: Map<string, number>;
  byConnection: Map<string, number>;
}

async function main(): Promise<void> {
  const server = await startRedis();
  const { connect, closeAll } = connector(server.url);
  fakeAgent.install();
  const admin = connect('bench-admin');
  // monitor() opens a connection of its own, closed below.
  const monitor = await admin.monitor();
  let counts: Counts | null = null;
  const names = new Map<string, string>();
  const refreshNames = async (): Promise<void> => {
    const list = String(await admin.client('LIST'));
    for (const line of list.split('\n')) {
      const addr = /\baddr=(\S+)/.exec(line)?.[1];
      const name = /\bname=(\S*)/.exec(line)?.[1];
      if (addr !== undefined) names.set(addr, name === undefined || name === '' ? '(unnamed)' : name);
    }
  };
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
    if (counts === null) return;
    const command = (args[0] ?? '?').toLowerCase();
    const scripted = source === 'lua';
    const bucket = scripted ? counts.lua : counts.client;
    // EVALSHA: name the script by its number of keys and first key's tail, enough to tell them apart.
    const label =
      command === 'evalsha' || command === 'eval' ? `${command} (${args[3]?.replace(/^.*:/, '…:') ?? '?'})` : command;
    bucket.set(label, (bucket.get(label) ?? 0) + 1);
    if (!scripted) {
      const who = `${names.get(source) ?? source}: ${label}`;
      counts.byConnection.set(who, (counts.byConnection.get(who) ?? 0) + 1);
    }
  });
  const fresh = (): Counts => ({ client: new Map(), lua: new Map(), byConnection: new Map() });
  const report = (what: string, c: Counts): void => {
    const sum = (m: Map<string, number>): number => [...m.values()].reduce((a, b) => a + b, 0);
    const top = (m: Map<string, number>): string =>
      [...m.entries()]
        .sort((a, b) => b[1] - a[1])
        .map(([k, v]) => `${k} ${(v / N).toFixed(2)}`)
        .join(', ');
    console.log(
      `${what}: ${(sum(c.client) / N).toFixed(1)} commands sent per item, ${(sum(c.lua) / N).toFixed(1)} more run inside Lua scripts`,
    );
    console.log(`  sent, by connection: ${top(c.byConnection)}`);
    console.log(`  sent: ${top(c.client)}`);
    console.log(`  inside scripts: ${top(c.lua)}`);
  };

  try {
    // ---- sessions
    const prefix = `rt-${randomUUID().slice(0, 6)}`;
    const keys = createKeys(prefix);
    const runtime = new Runtime({ connect, prefix });
    const released = new Set<string>();
    let allReleased: () => void = () => undefined;
    const done = new Promise<void>((resolve) => (allReleased = resolve));
    const worker = benchWorker(connect, keys, {
      concurrency: CONCURRENCY,
      agentOptions: fakeAgent.fakeHostOptions({ messages: MESSAGES }),
      log: (_level, message, fields) => {
        if (
          message === 'session released' &&
          typeof fields?.sessionId === 'string' &&
          fields.sessionId.startsWith('s')
        ) {
          released.add(fields.sessionId);
          if (released.size === N) allReleased();
        }
      },
    });
    await internals(runtime).redis.ping();
    await worker.start();
    // A few untimed sessions first: the scripts are loaded (SCRIPT LOAD / EVAL fallbacks) before counting.
    await pool(['w1', 'w2', 'w3'], 3, (sessionId) =>
      runtime.enqueue({ sessionId, prompt: PROMPT, options: fakeAgent.fakeTurnOptions() }),
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    await refreshNames();
    counts = fresh();
    const ids = Array.from({ length: N }, (_, i) => `s${i}`);
    await pool(ids, 16, (sessionId) =>
      runtime.enqueue({ sessionId, prompt: PROMPT, options: fakeAgent.fakeTurnOptions() }),
    );
    await withTimeout(done, 120_000, `${N} sessions released`);
    const sessionCounts: Counts = counts;
    counts = null;
    await worker.close(2000);
    await runtime.close();
    report(`session (enqueue → worker → ${MESSAGES} messages persisted → released), ${N} sessions`, sessionCounts);

    // ---- bare BullMQ
    const barePrefix = createKeys(`rt-bare-${randomUUID().slice(0, 6)}`).queuePrefix;
    const queue = new Queue(QUEUE_NAME, {
      connection: connect('base-queue'),
      prefix: barePrefix,
      defaultJobOptions: JOB_OPTIONS,
    });
    let completed = 0;
    let allDone: () => void = () => undefined;
    const finished = new Promise<void>((resolve) => (allDone = resolve));
    const bare = bareWorker(connect, barePrefix, CONCURRENCY, async () => 'done');
    bare.on('completed', (job) => {
      if (!String(job.id).startsWith('s')) return;
      completed += 1;
      if (completed === N) allDone();
    });
    await queue.waitUntilReady();
    await bare.waitUntilReady();
    const add = (id: string) => queue.add(ACTIVATION_JOB, { sessionId: id }, { jobId: `${id}.${randomUUID()}` });
    await pool(['w1', 'w2', 'w3'], 3, add);
    await new Promise((resolve) => setTimeout(resolve, 500));
    await refreshNames();
    counts = fresh();
    await pool(ids, 16, add);
    await withTimeout(finished, 120_000, `${N} bare jobs completed`);
    const bareCounts: Counts = counts;
    counts = null;
    await bare.close();
    await queue.close();
    report(`bare BullMQ job (add → no-op processor → completed), ${N} jobs`, bareCounts);
  } finally {
    monitor.disconnect();
    closeAll();
    await server.stop();
  }
}

try {
  await main();
} catch (error) {
  console.error(error);
  process.exitCode = 1;
}
// A failure may leave a worker's timers behind: this is a one-shot diagnostic, so end here.
process.exit();
