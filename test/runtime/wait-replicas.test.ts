import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKeys } from '../../src/runtime/keys.ts';
import { createRedis } from '../../src/runtime/redis/connection.ts';
import { ReplicationError, SessionStore } from '../../src/runtime/store/session-store.ts';
import { startRedisCluster, type RedisCluster } from '../support/redis-cluster.ts';
import { uniquePrefix } from '../support/redis.ts';

/**
 * SESSIOND_REDIS_WAIT_REPLICAS: a fenced write counts as written only once that many replicas
 * have it (WAIT on the same connection, right after it). Then a master killed at once loses
 * nothing that was acknowledged: its replica, promoted by the cluster, holds it.
 */

let cluster: RedisCluster;
const made: Redis[] = [];
const connect = (url: string, role: string): Redis => {
  const client = createRedis(url, { role, maxRetriesPerRequest: null, log: () => undefined });
  made.push(client);
  return client;
};

beforeAll(async () => {
  cluster = await startRedisCluster();
}, 90_000);
afterAll(async () => {
  made.forEach((c) => c.disconnect());
  await cluster?.stop();
});

const message = (text: string) => ({ turn: 1, attempt: 1, type: 'assistant', content: JSON.stringify({ text }) });

async function newSession(store: SessionStore, sessionId: string): Promise<string> {
  await store.enqueue(
    sessionId,
    { agent: 'pi', options: '{}' },
    { id: 'p1', text: 'hi', options: {}, enqueuedAt: Date.now() },
    null,
    `${sessionId}.job`,
  );
  const lease = await store.acquire(sessionId, 'test-worker', 60_000);
  if (!lease.ok) throw new Error('no lease');
  return lease.token;
}

/** The port of the master that serves the session's keys now. */
async function masterOf(redis: Redis, key: string): Promise<number> {
  const slot = Number(await redis.cluster('KEYSLOT', key));
  const layout = await redis.cluster('SLOTS');
  const port = layout.find(([from, to]) => slot >= from && slot <= to)?.[2]?.[1];
  if (port === undefined) throw new Error(`no master for slot ${slot}`);
  return Number(port);
}

describe('fenced writes wait for replicas (WAIT)', () => {
  it('with 1 replica asked the write is acknowledged once the replica has it; with 2 asked (there is one) it is refused and sent again, written once', async () => {
    const redis = connect(cluster.url, 'wait');
    const keys = createKeys(uniquePrefix('wait'));
    const store = new SessionStore(redis, keys, { waitReplicas: 1, waitTimeoutMs: 2000 });
    const token = await newSession(store, 'w1');
    await store.write('w1', token, { writeId: 1, messages: [message('kept')] });
    // Read on the replica itself: the message is there at the moment of the acknowledgement.
    const masterPort = await masterOf(redis, keys.session('w1', 'log'));
    const replicas = [];
    for (const node of cluster.nodes) {
      const direct = connect(`redis://127.0.0.1:${node.port}`, 'direct');
      const info = await direct.info('replication');
      if (info.includes('role:slave') && info.includes(`master_port:${masterPort}`)) replicas.push(direct);
    }
    expect(replicas).toHaveLength(1);
    await replicas[0]?.call('READONLY');
    expect((await replicas[0]?.xrange(keys.session('w1', 'log'), '-', '+'))?.length).toBe(1);

    const greedy = new SessionStore(redis, keys, { waitReplicas: 2, waitTimeoutMs: 200 });
    await expect(greedy.write('w1', token, { writeId: 2, messages: [message('twice?')] })).rejects.toBeInstanceOf(
      ReplicationError,
    );
    // Sent again with the same write id (as the session writer does): nothing is written twice.
    await expect(greedy.write('w1', token, { writeId: 2, messages: [message('twice?')] })).rejects.toBeInstanceOf(
      ReplicationError,
    );
    expect((await store.readMessages('w1', 1, 100)).map((m) => m.seq)).toEqual([1, 2]);
  });

  it('a master kill -9ed right after an acknowledged write: the cluster promotes its replica, and the write is there', async () => {
    const redis = connect(cluster.url, 'failover');
    const keys = createKeys(uniquePrefix('failover'));
    const store = new SessionStore(redis, keys, { waitReplicas: 1, waitTimeoutMs: 2000 });
    const token = await newSession(store, 'f1');
    const batch = Array.from({ length: 50 }, (_, i) => message(`m${i}`));
    await store.write('f1', token, { writeId: 1, messages: batch });
    const port = await masterOf(redis, keys.session('f1', 'log'));
    const master = cluster.nodes.find((n) => n.port === port);
    await master?.server.kill();
    await cluster.waitHealthy();
    expect(await masterOf(redis, keys.session('f1', 'log'))).not.toBe(port);
    const messages = await store.readMessages('f1', 1, 100);
    expect(messages.map((m) => m.seq)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    // The promoted master has no replica left: a write that must reach one is refused (and sent again
    // by the writer until a replica is back) — the price of WAIT. Without WAIT the holder goes on: its
    // lease and fence came over with the data.
    await expect(store.write('f1', token, { writeId: 2, messages: [message('after')] })).rejects.toBeInstanceOf(
      ReplicationError,
    );
    const noWait = new SessionStore(redis, keys);
    await noWait.write('f1', token, { writeId: 2, messages: [message('after')] });
    expect((await store.readMessages('f1', 1, 100)).map((m) => m.seq)).toEqual(
      Array.from({ length: 51 }, (_, i) => i + 1),
    );
  }, 90_000);
});
