import { tmpdir } from 'node:os';
import { deploymentPolicy } from '../../src/runtime/deployment-policy.ts';
import { createRedis } from '../../src/runtime/redis/connection.ts';
import { Runtime } from '../../src/runtime/runtime.ts';
import { internals } from '../../src/runtime/internals.ts';
import { startRedisCluster } from './redis-cluster.ts';
import { balance, probeMasters } from './spread.ts';

/**
 * Keys spread on a real 3-master Redis Cluster: SESSIONS sessions enqueued (sessions, prompts,
 * activation jobs, fleet indexes; no worker drives them) with N queue partitions, then the
 * commands each master served (INFO commandstats, summed) and the memory each gained.
 *   node --import tsx test/support/measure-spread.ts [PARTITIONS=6] [PREFIX=spread] [SESSIONS=3000]
 * Prints one JSON line: commands and memory per master and their max ÷ min.
 * (test/runtime/partitions.test.ts asserts the band with fewer sessions.)
 */
const TEST_POLICY = deploymentPolicy({ workspace: tmpdir() });
const partitions = Number(process.argv[2] ?? 6);
const prefix = process.argv[3] ?? 'spread';
const sessions = Number(process.argv[4] ?? 3000);
const c = await startRedisCluster();
const made: ReturnType<typeof createRedis>[] = [];
const connect = (role: string) => {
  const r = createRedis(c.url, { role, maxRetriesPerRequest: null, log: () => undefined });
  made.push(r);
  return r;
};
const rt = new Runtime({ connect, prefix, policy: TEST_POLICY, queuePartitions: partitions });
const probe = await probeMasters(c);
await probe.reset();
for (let i = 0; i < sessions; i += 50)
  await Promise.all(
    Array.from({ length: Math.min(50, sessions - i) }, (_, j) =>
      rt.enqueue({ sessionId: `s-${i + j}`, prompt: 'hello' }),
    ),
  );
await internals(rt).store.flushIndex();
const { commands, memory } = await probe.read();
console.log(
  JSON.stringify({
    partitions,
    prefix,
    sessions,
    commands,
    cmdRatio: balance(commands),
    memory,
    memRatio: balance(memory),
  }),
);
await rt.close();
made.forEach((r) => r.disconnect());
probe.close();
await c.stop();
process.exit(0);
