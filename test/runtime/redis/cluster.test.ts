import { Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/config.ts';
import { EventBus } from '../../../src/runtime/event-bus.ts';
import { createKeys } from '../../../src/runtime/keys.ts';
import { MessageHub } from '../../../src/runtime/message-hub.ts';
import { hgetEach } from '../../../src/runtime/redis/batch.ts';
import { createRedis, isCluster, parseRedisTarget, redactUrl } from '../../../src/runtime/redis/connection.ts';
import type { StoredMessage } from '../../../src/runtime/store/session-store.ts';
import { startRedisCluster, type RedisCluster } from '../../support/redis-cluster.ts';
import { uniquePrefix } from '../../support/redis.ts';

describe('a cluster REDIS_URL', () => {
  it('redis+cluster:// names seed nodes, with the credentials once for all of them; the display masks the password', () => {
    const parsed = parseRedisTarget('redis+cluster://alice:s3cret@10.0.0.1:7000,10.0.0.2:7001,[::1]:7002');
    expect(parsed).toMatchObject({
      ok: true,
      kind: 'cluster',
      nodes: [
        { host: '10.0.0.1', port: 7000 },
        { host: '10.0.0.2', port: 7001 },
        { host: '::1', port: 7002 },
      ],
      options: { username: 'alice', password: 's3cret' },
      display: 'redis+cluster://alice:***@10.0.0.1:7000,10.0.0.2:7001,[::1]:7002',
    });
    expect(redactUrl('redis+cluster://:s3cret@h1:1,h2:2')).toBe('redis+cluster://:***@h1:1,h2:2');
  });

  it('rediss+cluster:// turns TLS on for every node (SNI for a host name)', () => {
    expect(parseRedisTarget('rediss+cluster://:pw@cache.example.com:6380')).toMatchObject({
      ok: true,
      kind: 'cluster',
      options: { tls: { servername: 'cache.example.com' } },
    });
  });

  it.each([
    ['redis+cluster://', /seed node 1 is empty|missing host/],
    ['redis+cluster://h1:7000,,h2:7001', /seed node 2 is empty/],
    ['redis+cluster://h1:7000,h2:99999', /port must be .* \(seed node 2\)/],
    ['redis+cluster://h1:7000/3', /takes no database/],
    ['redis+cluster://h1:7000?x=1', /takes no database, query/],
  ])('refuses %j, naming what is wrong', (url, message) => {
    const parsed = parseRedisTarget(url);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.message).toMatch(message);
  });

  it('the configuration takes a cluster URL, and refuses a bad one naming redisUrl without quoting the password', () => {
    expect(loadConfig({}, { REDIS_URL: 'redis+cluster://:pw@h1:7000,h2:7001' }).redisUrl).toBe(
      'redis+cluster://:pw@h1:7000,h2:7001',
    );
    let message = '';
    try {
      loadConfig({}, { REDIS_URL: 'redis+cluster://:hunter2hunter2@h1:7000,h2:0' });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/redisUrl/);
    expect(message).toMatch(/port must be/);
    expect(message).not.toContain('hunter2');
  });
});

describe('on a real Redis Cluster (3 masters, 3 replicas)', () => {
  let cluster: RedisCluster;
  const made: Redis[] = [];
  const connect = (role: string): Redis => {
    const client = createRedis(cluster.url, { role, maxRetriesPerRequest: null, log: () => undefined });
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

  it('createRedis gives a cluster client that routes each key to its master', async () => {
    const redis = connect('cluster-test');
    expect(isCluster(redis)).toBe(true);
    const keys = createKeys(uniquePrefix('route'));
    const ids = Array.from({ length: 30 }, (_, i) => `s${i}`);
    await Promise.all(ids.map((id) => redis.hset(keys.session(id, 'meta'), 'state', `st-${id}`)));
    // Spread over the three masters, and read back across them.
    const masters = await cluster.masters();
    const counts = await Promise.all(
      masters.map((m) => {
        const direct = createRedis(`redis://127.0.0.1:${m.port}`, { role: 'probe', log: () => undefined });
        made.push(direct);
        return direct.dbsize();
      }),
    );
    expect(counts.filter((n) => n > 0)).toHaveLength(3);
    expect(
      await hgetEach(
        redis,
        ids.map((id) => keys.session(id, 'meta')),
        'state',
      ),
    ).toEqual(ids.map((id) => `st-${id}`));
  });

  it('a script over keys of two sessions (two slots) is refused by Redis: such a bug cannot pass on the cluster', async () => {
    const redis = connect('crossslot');
    const keys = createKeys(uniquePrefix('cross'));
    await expect(
      redis.eval("return redis.call('GET', KEYS[1])", 2, keys.session('a', 'meta'), keys.session('b', 'meta')),
    ).rejects.toThrow(/CROSSSLOT/);
    // One session's keys share its hash tag: one slot, allowed.
    await expect(
      redis.eval(
        "redis.call('SET', KEYS[1], 'x'); return redis.call('GET', KEYS[2])",
        2,
        keys.session('a', 'meta'),
        keys.session('a', 'seq'),
      ),
    ).resolves.toBeNull();
  });

  it('BullMQ: a queue under the hash-tagged prefix adds and a worker processes its jobs on the cluster', async () => {
    const keys = createKeys(uniquePrefix('bull'));
    const queue = new Queue('sessions', { connection: connect('bull-queue'), prefix: keys.queuePrefix });
    const done: string[] = [];
    const finished = new Promise<void>((resolve) => {
      const worker = new Worker(
        'sessions',
        async (job) => {
          done.push(String(job.data.n));
          if (done.length === 5) resolve();
        },
        { connection: connect('bull-worker'), prefix: keys.queuePrefix },
      );
      worker.on('error', () => undefined);
      afterAll(() => worker.close());
    });
    for (let n = 0; n < 5; n += 1) await queue.add('activate', { n });
    await finished;
    expect(done.sort()).toEqual(['0', '1', '2', '3', '4']);
    await queue.close();
  });

  it('the event bus: an event published from one client reaches a subscriber on another node', async () => {
    const keys = createKeys(uniquePrefix('bus'));
    const bus = new EventBus(connect('bus-sub'), connect('bus-pub'), keys);
    await bus.start();
    const got = new Promise<string>((resolve) => bus.on('s1', (e) => resolve(e.kind)));
    const publisher = new EventBus(connect('bus-sub-2'), connect('bus-pub-2'), keys);
    await publisher.publish({ sessionId: 's1', kind: 'cancel' });
    expect(await got).toBe('cancel');
  });

  it('the message hub follows the logs of sessions in many slots, each whole and in order', async () => {
    const redis = connect('hub');
    const keys = createKeys(uniquePrefix('hub'));
    const hub = new MessageHub({
      connect: () => connect('hub-reader'),
      redis,
      logKey: (id) => keys.session(id, 'log'),
    });
    const sessions = ['alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta'];
    const controller = new AbortController();
    const add = (id: string, seq: number) =>
      redis.xadd(
        keys.session(id, 'log'),
        `${seq}-0`,
        'seq',
        seq,
        'turn',
        1,
        'attempt',
        1,
        'type',
        'assistant',
        'content',
        JSON.stringify({ text: `${id}-${seq}` }),
      );
    for (const id of sessions) await add(id, 1);
    const followed = sessions.map(async (id) => {
      const seen: StoredMessage[] = [];
      for await (const message of hub.follow(id, 1, controller.signal)) {
        seen.push(message);
        if (seen.length === 20) break;
      }
      return seen.map((m) => m.seq);
    });
    for (let seq = 2; seq <= 20; seq += 1) await Promise.all(sessions.map((id) => add(id, seq)));
    const results = await Promise.all(followed);
    controller.abort();
    await hub.close();
    for (const seqs of results) expect(seqs).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
  });
});
