import { describe, expect, it } from 'vitest';
import { createKeys } from '../../src/runtime/keys.ts';
import { keySlot } from '../../src/runtime/redis/slot.ts';
import { lifecycleKeys, sessionsKey } from '../../src/runtime/lifecycle/keys.ts';
import { RuntimeMetrics } from '../../src/runtime/metrics.ts';
import { createSessionQueue, partitionOf } from '../../src/runtime/queue.ts';
import { Runtime } from '../../src/runtime/runtime.ts';
import type { PiEnv } from '../support/pi-env.ts';
import type { RedisCluster } from '../support/redis-cluster.ts';
import { balance, probeMasters } from '../support/spread.ts';
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

describe('partitionTag', () => {
  it('puts 6 (and 12) partitions two (four) to each third and three (six) to each half of the slot space, whatever the prefix; partition 0 keeps {<prefix>:q}', () => {
    for (let p = 0; p < 200; p += 1) {
      const prefix = `p${p}-${(p * 7919).toString(36)}`;
      const keys = createKeys(prefix);
      expect(keys.queuePartitionPrefix(0)).toBe(`{${prefix}:q}`);
      for (const n of [6, 12]) {
        const slots = Array.from({ length: n }, (_, i) => keySlot(`${keys.queuePartitionPrefix(i)}:sessions:wait`));
        const thirds = [0, 1, 2].map((t) => slots.filter((slot) => Math.floor(slot / (16384 / 3)) === t).length);
        const halves = [0, 1].map((h) => slots.filter((slot) => Math.floor(slot / 8192) === h).length);
        expect(thirds).toEqual([n / 3, n / 3, n / 3]);
        expect(halves).toEqual([n / 2, n / 2]);
      }
      expect(keys.queuePartitionPrefix(5)).toBe(createKeys(prefix).queuePartitionPrefix(5));
    }
  });
});

describe('the partitioned queue on a Redis Cluster', () => {
  useRuntimeSuite('partitions', { backend: 'cluster' }, (s) => {
    ({ env, h } = s);
    cluster = s.cluster as RedisCluster;
  });

  const runtimeWith = (partitions: number): Runtime =>
    new Runtime({ connect: h.connect, prefix: h.prefix, policy: TEST_POLICY, queuePartitions: partitions });
  const queueWith = (partitions: number) =>
    createSessionQueue(h.connect('partition-queue'), createKeys(h.prefix), { partitions });

  it('with 6 partitions each session’s job goes to its own partition, two partitions on each master, and one worker runs them all', async () => {
    const runtime = runtimeWith(6);
    const ids: string[] = [];
    // Sessions chosen so that every partition gets one.
    for (let i = 0; ids.length < 6; i += 1) {
      const id = `p6-${i}`;
      if (!ids.some((other) => partitionOf(other, 6) === partitionOf(id, 6))) ids.push(id);
    }
    for (const sessionId of ids)
      await runtime.enqueue({
        sessionId,
        prompt: 'Say hello',
        options: { provider: 'fake', model: 'text', cwd: env.cwd },
      });
    // Each job is waiting in its session's partition, under that partition's hash tag.
    for (const sessionId of ids) {
      const jobId = await internals(runtime).store.activeJobId(sessionId);
      const job = await internals(runtime)
        .queue.partition(partitionOf(sessionId, 6))
        .getJob(jobId ?? '');
      expect(job?.data).toEqual({ sessionId });
    }
    // The six partitions' keys live on the three masters, two on each (their tags are chosen so, whatever the prefix).
    const slots = await Promise.all(
      [0, 1, 2, 3, 4, 5].map((n) =>
        internals(h.runtime).redis.cluster('KEYSLOT', `${createKeys(h.prefix).queuePartitionPrefix(n)}:sessions:meta`),
      ),
    );
    const owners = new Map<string, number>();
    const layout = await internals(h.runtime).redis.cluster('SLOTS');
    for (const slot of slots as number[]) {
      const owner = String(layout.find(([from, to]) => slot >= from && slot <= to)?.[2]?.[1]);
      owners.set(owner, (owners.get(owner) ?? 0) + 1);
    }
    expect([...owners.values()]).toEqual([2, 2, 2]);
    expect((await cluster.masters()).map((m) => String(m.port)).sort()).toEqual([...owners.keys()].sort());

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
    await one.enqueue({
      sessionId: grown,
      prompt: 'Say hello',
      options: { provider: 'fake', model: 'text', cwd: env.cwd },
    });
    // …and jobs added with 6 partitions, then the deployment goes back to 1.
    const six = runtimeWith(6);
    const shrunk: string[] = [];
    for (let i = 0; shrunk.length < 2; i += 1) if (partitionOf(`shrink-${i}`, 6) !== 0) shrunk.push(`shrink-${i}`);
    for (const sessionId of shrunk)
      await six.enqueue({ sessionId, prompt: 'Say hello', options: { provider: 'fake', model: 'text', cwd: env.cwd } });

    // A worker of the new, single-partition deployment consumes every partition ever used.
    const worker = await h.startWorker({ queue: queueWith(1) });
    expect(worker.partitions).toEqual([0, 1, 2, 3, 4, 5]);
    for (const sessionId of [grown, ...shrunk])
      expect((await turnEnded(one, sessionId, 1, 120_000)).state).toBe('completed');
    await worker.close(2000);
    await Promise.all([one.close(), six.close()]);
  }, 180_000);

  it('the fleet indexes are sharded with the partitions, and a deployment back at 1 partition still lists, pages, counts and deletes every session', async () => {
    const keys = createKeys(h.prefix);
    const options = { provider: 'fake', model: 'text', cwd: env.cwd };
    // Two sessions stored with 1 partition (shard 0), then 24 with 6 (each in its partition's shard).
    const one = runtimeWith(1);
    const six = runtimeWith(6);
    const ids: string[] = [];
    for (let i = 0; i < 2; i += 1) {
      await one.enqueue({ sessionId: `idx1-${i}`, prompt: 'Say hello', options });
      ids.push(`idx1-${i}`);
    }
    for (let i = 0; i < 24; i += 1) {
      await six.enqueue({ sessionId: `idx6-${i}`, prompt: 'Say hello', options });
      ids.push(`idx6-${i}`);
    }
    await internals(six).store.flushIndex();
    // Each session's listing entry is in its shard (0 for those of 1 partition, its partition's + 1 for the others), and every shard holds some.
    for (const id of ids) {
      const shard = id.startsWith('idx1-') ? 0 : partitionOf(id, 6) + 1;
      expect(await internals(h.runtime).redis.zscore(sessionsKey(keys, shard), id)).not.toBeNull();
      expect(await internals(h.runtime).redis.zscore(lifecycleKeys(keys, shard).byState('queued'), id)).not.toBeNull();
    }
    for (let n = 0; n <= 6; n += 1)
      expect(await internals(h.runtime).redis.zcard(sessionsKey(keys, n))).toBeGreaterThan(0);

    // The 1-partition deployment merges every shard: pages of 5 give each session once, newest first, as one big page does.
    const whole = (await one.listPage({ limit: 1000, state: 'queued' })).sessions.map((s) => s.sessionId);
    // (The sessions of the tests above are listed too: they were made with 6 partitions, and have completed.)
    expect(whole.filter((id) => id.startsWith('idx')).sort()).toEqual([...ids].sort());
    const paged: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await one.listPage({ limit: 5, state: 'queued', ...(cursor === undefined ? {} : { cursor }) });
      paged.push(...page.sessions.map((s) => s.sessionId));
      cursor = page.next ?? undefined;
    } while (cursor !== undefined);
    expect(paged).toEqual(whole);
    // Counts by state, and a bulk cancel's selection, cover every shard too.
    expect(await new RuntimeMetrics(one, { cacheMs: 0 }).render()).toContain(
      `sessiond_sessions{state="queued"} ${ids.length}`,
    );
    expect((await one.cancelMatching({ state: 'queued', dryRun: true })).matched).toHaveLength(ids.length);

    // A session of a partition's shard, deleted by the 1-partition deployment, leaves nothing in its shard.
    const victim = ids.find((id) => id.startsWith('idx6-')) as string;
    await one.deleteSession(victim, { force: true, waitMs: 0 });
    const shard = partitionOf(victim, 6) + 1;
    expect(await internals(h.runtime).redis.zscore(sessionsKey(keys, shard), victim)).toBeNull();
    expect(await internals(h.runtime).redis.zscore(lifecycleKeys(keys, shard).byState('queued'), victim)).toBeNull();
    expect(await internals(h.runtime).redis.hget(lifecycleKeys(keys, shard).states, victim)).toBeNull();
    expect((await one.listPage({ limit: 1000 })).sessions.map((s) => s.sessionId)).not.toContain(victim);
    await Promise.all([one.close(), six.close()]);
  }, 180_000);

  it('keys spread: 1,500 sessions with 6 partitions on 3 masters put the commands and the memory of each master within 1.3 × of the others', async () => {
    const probe = await probeMasters(cluster);
    const runtime = runtimeWith(6);
    try {
      await probe.reset();
      for (let i = 0; i < 1500; i += 50)
        await Promise.all(
          Array.from({ length: 50 }, (_, j) => runtime.enqueue({ sessionId: `spread-${i + j}`, prompt: 'Say hello' })),
        );
      await internals(runtime).store.flushIndex();
      const { commands, memory } = await probe.read();
      // Every master served a share (1,500 sessions take tens of thousands of commands), and none much more than another.
      expect(Math.min(...commands)).toBeGreaterThan(1500);
      expect(balance(commands)).toBeLessThanOrEqual(1.3);
      expect(balance(memory)).toBeLessThanOrEqual(1.3);
    } finally {
      probe.close();
      await runtime.close();
    }
  }, 180_000);
});
