import { describe, expect, it } from 'vitest';
import { createKeys } from '../../src/runtime/keys.ts';
import { createSessionQueue, partitionOf } from '../../src/runtime/queue.ts';
import { Runtime } from '../../src/runtime/runtime.ts';
import type { PiEnv } from '../support/pi-env.ts';
import type { RedisCluster } from '../support/redis-cluster.ts';
import { expectWholeLog, TEST_POLICY, turnEnded, type Harness, useRuntimeSuite } from '../support/runtime.ts';
import { internals } from '../../src/runtime/internals.ts';

/**
 * The partitioned activation queue (SESSIOND_QUEUE_PARTITIONS), on a real Redis Cluster: each
 * partition a BullMQ queue under its own hash tag, a session always in the same one, workers
 * consuming every partition the deployment has used, so changing the count strands nothing.
 */

let env: PiEnv;
let h: Harness;
let cluster: RedisCluster;

describe('partitionOf', () => {
  it('maps a session to the same partition every time, and spreads sessions over all of them', () => {
    const ids = Array.from({ length: 6000 }, (_, i) => `session-${i}`);
    const counts = new Array<number>(6).fill(0);
    for (const id of ids) counts[partitionOf(id, 6)] = (counts[partitionOf(id, 6)] ?? 0) + 1;
    expect(ids.every((id) => partitionOf(id, 6) === partitionOf(id, 6))).toBe(true);
    // Each partition within 10 % of an even share (1000).
    for (const n of counts) expect(Math.abs(n - 1000)).toBeLessThan(100);
    expect(partitionOf('anything', 1)).toBe(0);
  });
});

describe('the partitioned queue on a Redis Cluster', () => {
  useRuntimeSuite('partitions', { backend: 'cluster' }, (s) => {
    ({ env, h } = s);
    cluster = s.cluster as RedisCluster;
  });

  const runtimeWith = (partitions: number): Runtime => new Runtime({ connect: h.connect, prefix: h.prefix, policy: TEST_POLICY, queuePartitions: partitions });
  const queueWith = (partitions: number) => createSessionQueue(h.connect('partition-queue'), createKeys(h.prefix), { partitions });

  it('with 6 partitions each session’s job goes to its own partition, the partitions sit on every master, and one worker runs them all', async () => {
    const runtime = runtimeWith(6);
    const ids: string[] = [];
    // Sessions chosen so that every partition gets one.
    for (let i = 0; ids.length < 6; i += 1) {
      const id = `p6-${i}`;
      if (!ids.some((other) => partitionOf(other, 6) === partitionOf(id, 6))) ids.push(id);
    }
    for (const sessionId of ids) await runtime.enqueue({ sessionId, prompt: 'Say hello', options: { provider: 'fake', model: 'text', cwd: env.cwd } });
    // Each job is waiting in its session's partition, under that partition's hash tag.
    for (const sessionId of ids) {
      const jobId = await internals(runtime).store.activeJobId(sessionId);
      const job = await internals(runtime)
        .queue.partition(partitionOf(sessionId, 6))
        .getJob(jobId ?? '');
      expect(job?.data).toEqual({ sessionId });
    }
    // The six partitions' keys live on all three masters.
    const slots = await Promise.all([0, 1, 2, 3, 4, 5].map((n) => internals(h.runtime).redis.cluster('KEYSLOT', `${createKeys(h.prefix).queuePartitionPrefix(n)}:sessions:meta`)));
    const owners = new Set<string>();
    const layout = await internals(h.runtime).redis.cluster('SLOTS');
    for (const slot of slots as number[]) owners.add(String(layout.find(([from, to]) => slot >= from && slot <= to)?.[2]?.[1]));
    expect(owners.size).toBe(3);
    expect((await cluster.masters()).map((m) => String(m.port)).sort()).toEqual([...owners].sort());

    const worker = await h.startWorker({ queue: queueWith(6), concurrency: 6 });
    expect(worker.partitions).toEqual([0, 1, 2, 3, 4, 5]);
    for (const sessionId of ids) {
      expect((await turnEnded(runtime, sessionId, 1, 120_000)).state).toBe('completed');
      expectWholeLog(await runtime.readMessages(sessionId));
    }
    await worker.close(2000);
    await runtime.close();
  }, 180_000);

  it('changing the partition count strands nothing: jobs of the old count are still consumed, after growing and after shrinking', async () => {
    // A job added with 1 partition (partition 0) for a session that 6 partitions would put elsewhere…
    let grown = '';
    for (let i = 0; grown === ''; i += 1) if (partitionOf(`grow-${i}`, 6) !== 0) grown = `grow-${i}`;
    const one = runtimeWith(1);
    await one.enqueue({ sessionId: grown, prompt: 'Say hello', options: { provider: 'fake', model: 'text', cwd: env.cwd } });
    // …and jobs added with 6 partitions, then the deployment goes back to 1.
    const six = runtimeWith(6);
    const shrunk: string[] = [];
    for (let i = 0; shrunk.length < 2; i += 1) if (partitionOf(`shrink-${i}`, 6) !== 0) shrunk.push(`shrink-${i}`);
    for (const sessionId of shrunk) await six.enqueue({ sessionId, prompt: 'Say hello', options: { provider: 'fake', model: 'text', cwd: env.cwd } });

    // A worker of the new, single-partition deployment consumes every partition ever used.
    const worker = await h.startWorker({ queue: queueWith(1) });
    expect(worker.partitions).toEqual([0, 1, 2, 3, 4, 5]);
    for (const sessionId of [grown, ...shrunk]) expect((await turnEnded(one, sessionId, 1, 120_000)).state).toBe('completed');
    await worker.close(2000);
    await Promise.all([one.close(), six.close()]);
  }, 180_000);
});
