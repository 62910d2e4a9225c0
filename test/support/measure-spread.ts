import { tmpdir } from 'node:os';
import { deploymentPolicy } from '../../src/runtime/deployment-policy.ts';
import { createRedis } from '../../src/runtime/redis/connection.ts';
import { Runtime } from '../../src/runtime/runtime.ts';
import { startRedisCluster } from './redis-cluster.ts';

/**
 * Keys spread on a real 3-master Redis Cluster: 3,000 sessions enqueued (sessions, prompts,
 * activation jobs, fleet indexes; no worker drives them) with N queue partitions, then the
 * commands each master served (INFO commandstats, summed) and the memory each gained.
 *   node --import tsx test/support/measure-spread.ts [PARTITIONS=6] [PREFIX=spread]
 * Prints one JSON line: commands and memory per master and their max ÷ min.
 */
const TEST_POLICY = deploymentPolicy({ workspace: tmpdir() });
const partitions = Number(process.argv[2] ?? 6);
const prefix = process.argv[3] ?? 'spread';
const c = await startRedisCluster();
const made: ReturnType<typeof createRedis>[] = [];
const connect = (role: string) => {
  const r = createRedis(c.url, { role, maxRetriesPerRequest: null, log: () => undefined });
  made.push(r);
  return r;
};
const rt = new Runtime({ connect, prefix, policy: TEST_POLICY, queuePartitions: partitions });
const masters = await c.masters();
const direct = masters.map((m) => createRedis(`redis://127.0.0.1:${m.port}`, { role: 'probe', log: () => undefined }));
await Promise.all(direct.map((d) => d.config('RESETSTAT')));
const mem0 = await Promise.all(direct.map(async (d) => Number(/used_memory:(\d+)/.exec(await d.info('memory'))?.[1])));
for (let i = 0; i < 3000; i += 50) await Promise.all(Array.from({ length: 50 }, (_, j) => rt.enqueue({ sessionId: `s-${i + j}`, prompt: 'hello' })));
const stats = await Promise.all(
  direct.map(async (d) => {
    const t = await d.info('commandstats');
    let n = 0;
    for (const m of t.matchAll(/calls=(\d+)/g)) n += Number(m[1]);
    return n;
  }),
);
const mem = await Promise.all(direct.map(async (d, i) => Number(/used_memory:(\d+)/.exec(await d.info('memory'))?.[1]) - (mem0[i] ?? 0)));
console.log(JSON.stringify({ partitions, prefix, commands: stats, cmdRatio: Math.max(...stats) / Math.min(...stats), memory: mem, memRatio: Math.max(...mem) / Math.min(...mem) }));
await rt.close();
made.forEach((r) => r.disconnect());
direct.forEach((d) => d.disconnect());
await c.stop();
process.exit(0);
