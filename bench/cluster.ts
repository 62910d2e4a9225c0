import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import { registerAgent } from '../src/agents/registry.ts';
import { defineAgent } from '../src/index.ts';
import { deploymentPolicy } from '../src/runtime/deployment-policy.ts';
import { createRedis } from '../src/runtime/redis/connection.ts';
import { createSessionQueue } from '../src/runtime/queue.ts';
import { Runtime } from '../src/runtime/runtime.ts';
import { SessionWorker, WORKER_DEFAULTS } from '../src/runtime/worker.ts';
import { startRedisCluster, type RedisCluster } from '../test/support/redis-cluster.ts';
import { startRedis } from '../test/support/redis.ts';
import { balance, probeMasters } from '../test/support/spread.ts';
import { BenchFailure } from './support/benchmark.ts';
import { bounded, orNull, pool, sleep } from './support/harness.ts';
import { median, round } from './support/timing.ts';
import { internals } from '../src/runtime/internals.ts';

/**
 * sessiond on a real Redis Cluster (3 masters + 3 replicas on loopback, test/support/redis-cluster.ts)
 * against one redis-server. The workload: SESSIONS sessions of one prompt each, whose agent is an
 * in-process fake (defineAgent) yielding MESSAGES messages, driven by one in-process worker of
 * CONCURRENCY; timed from the first enqueue to the last turn's end, after a warm-up of WARMUP sessions.
 *
 * Runs: one Redis with 1 partition; the cluster with 1 partition; the cluster with 6 partitions,
 * without and with SESSIOND_REDIS_WAIT_REPLICAS=1 (those two alternated REPEAT times, so the load
 * of this shared machine falls on both alike). Figures: sessions/s of each; on the cluster, the
 * commands each master served during the measured sessions (INFO commandstats, summed) and their
 * max ÷ min (`masterBalance` with 6 partitions, `onePartitionBalance` with 1; target ≤ 1.3 with 6);
 * `waitCostRatio`: time per session with WAIT 1 ÷ without (median of the paired runs).
 * This machine has 2 cores shared by 6 redis-servers, the worker and the agents: absolute
 * throughput is not the point, the balance is.
 * BENCH_CLUSTER_SESSIONS (default 300), BENCH_CLUSTER_REPEAT (default 2).
 */
export const name = 'cluster';

const SESSIONS = Number(process.env.BENCH_CLUSTER_SESSIONS ?? 300);
const REPEAT = Number(process.env.BENCH_CLUSTER_REPEAT ?? 2);
const WARMUP = 20;
const MESSAGES = 20;
const CONCURRENCY = 16;
const TIME_LIMIT_MS = 20 * 60_000;
const AGENT = 'bench-twenty';

/** session.started, MESSAGES − 2 assistant deltas, terminal.completed: all at once. */
const twenty = defineAgent({
  name: AGENT,
  options: z.object({}),
  async *run({ prompt }) {
    yield { type: 'session.started', content: { sessionId: `fake-${prompt.length}` } };
    for (let i = 0; i < MESSAGES - 2; i += 1)
      yield { type: 'assistant', content: { text: `part ${i} of the answer. ` } };
    yield { type: 'terminal.completed', content: { stopReason: 'stop' } };
  },
});

interface RunFigures {
  sessionsPerSec: number;
  msPerSession: number;
  /** Per master, during the measured sessions (cluster only). */
  commands: number[] | null;
}

async function runOnce(
  url: string,
  cluster: RedisCluster | null,
  partitions: number,
  waitReplicas: number,
): Promise<RunFigures> {
  const made: Redis[] = [];
  const connect = (role: string): Redis => {
    const r = createRedis(url, { role, maxRetriesPerRequest: null, log: () => undefined });
    made.push(r);
    return r;
  };
  const prefix = `bc-${randomBytes(3).toString('hex')}`;
  const policy = deploymentPolicy({ workspace: '/tmp' });
  const runtime = new Runtime({ connect, prefix, policy, queuePartitions: partitions });
  const ended = new Map<string, () => void>();
  const worker = new SessionWorker({
    connect,
    keys: internals(runtime).keys,
    queue: createSessionQueue(connect('bench-worker-queue'), internals(runtime).keys, { partitions }),
    ...WORKER_DEFAULTS,
    concurrency: CONCURRENCY,
    agentOptions: {},
    policy,
    waitReplicas,
    events: { turnEnded: (event) => ended.get(event.sessionId)?.() },
  });
  await worker.start();
  const probe = cluster === null ? null : await probeMasters(cluster);
  const batch = async (ids: readonly string[]): Promise<void> => {
    const done = ids.map((id) => new Promise<void>((resolve) => ended.set(id, resolve)));
    await pool(ids, 32, (sessionId) =>
      runtime.enqueue({ sessionId, prompt: 'Summarize the session store.', options: { agent: AGENT } }),
    );
    await Promise.all(done);
  };
  try {
    await batch(Array.from({ length: WARMUP }, (_, i) => `warm-${i}`));
    await probe?.reset();
    const ids = Array.from({ length: SESSIONS }, (_, i) => `s-${i}`);
    const started = performance.now();
    await batch(ids);
    const ms = performance.now() - started;
    const commands = probe === null ? null : (await probe.read()).commands;
    await check(runtime, ids);
    return { sessionsPerSec: (SESSIONS * 1000) / ms, msPerSession: ms / SESSIONS, commands };
  } finally {
    probe?.close();
    await worker.close(2000);
    await runtime.close();
    made.forEach((r) => r.disconnect());
  }
}

/**
 * Every measured session completed with its whole log (one read per key: a cluster takes no
 * cross-slot pipeline). The turn's end is told as the machine gets there, its write lands just after.
 */
async function check(runtime: Runtime, ids: readonly string[]): Promise<void> {
  let states = await runtime.sessionStates(ids);
  for (let i = 0; i < 100 && ids.some((id) => states[id] !== 'completed'); i += 1) {
    await sleep(100);
    states = await runtime.sessionStates(ids);
  }
  const notCompleted = ids.filter((id) => states[id] !== 'completed');
  if (notCompleted.length > 0)
    throw new BenchFailure(
      `${notCompleted.length} sessions not completed, e.g. ${notCompleted[0]}: ${states[notCompleted[0] ?? ''] ?? 'no state'}`,
    );
  const lengths = await Promise.all(
    ids.map((id) => internals(runtime).redis.xlen(internals(runtime).store.key(id, 'log'))),
  );
  const wrong = lengths.findIndex((n) => n !== MESSAGES);
  if (wrong >= 0) throw new BenchFailure(`session ${ids[wrong]} has ${lengths[wrong]} messages, ${MESSAGES} expected`);
}

export async function run(log: (line: string) => void = console.log): Promise<Record<string, unknown>> {
  registerAgent(twenty.name, twenty.definition);
  return bounded('cluster', TIME_LIMIT_MS, log, async (cleanup) => {
    const single = await startRedis();
    cleanup.add('redis-server', () => single.stop());
    const cluster = await startRedisCluster();
    cleanup.add('redis cluster', () => cluster.stop());
    log(
      `${SESSIONS} sessions of ${MESSAGES} messages each (in-process agent), one worker of concurrency ${CONCURRENCY}, after ${WARMUP} warm-up sessions`,
    );
    const describe = (what: string, f: RunFigures): void =>
      log(
        `  ${what}: ${f.sessionsPerSec.toFixed(1)} sessions/s (${f.msPerSession.toFixed(1)} ms per session)` +
          (f.commands === null
            ? ''
            : `, commands per master ${f.commands.join(' / ')}, max ÷ min ${balance(f.commands).toFixed(2)}`),
      );
    const one = await runOnce(single.url, null, 1, 0);
    describe('one Redis, 1 partition', one);
    const clusterOne = await runOnce(cluster.url, cluster, 1, 0);
    describe('cluster, 1 partition', clusterOne);
    const six: RunFigures[] = [];
    const sixWait: RunFigures[] = [];
    for (let i = 0; i < REPEAT; i += 1) {
      // Alternated, the order swapping each round.
      const pair = i % 2 === 0 ? [false, true] : [true, false];
      for (const wait of pair) {
        const figures = await runOnce(cluster.url, cluster, 6, wait ? 1 : 0);
        (wait ? sixWait : six).push(figures);
        describe(`cluster, 6 partitions${wait ? ', WAIT 1' : ''} (run ${i + 1})`, figures);
      }
    }
    const masterBalance = median(six.map((f) => balance(f.commands ?? [])));
    const onePartitionBalance = balance(clusterOne.commands ?? []);
    const sessionsPerSec = median(six.map((f) => f.sessionsPerSec));
    const waitCostRatio = median(six.map((f, i) => (sixWait[i]?.msPerSession ?? Number.NaN) / f.msPerSession));
    log(
      `masters' commands max ÷ min: ${masterBalance.toFixed(2)} with 6 partitions (target ≤ 1.3), ${onePartitionBalance.toFixed(2)} with 1; ` +
        `${sessionsPerSec.toFixed(1)} sessions/s with 6 partitions (one Redis: ${one.sessionsPerSec.toFixed(1)}); WAIT 1 costs ${waitCostRatio.toFixed(2)} × the time per session`,
    );
    return {
      bench: name,
      partitions: 6,
      masterBalance: orNull(round(masterBalance, 3)),
      onePartitionBalance: orNull(round(onePartitionBalance, 3)),
      sessionsPerSec: orNull(round(sessionsPerSec, 1)),
      waitCostRatio: orNull(round(waitCostRatio, 3)),
    };
  });
}
