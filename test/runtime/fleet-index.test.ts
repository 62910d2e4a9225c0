import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKeys } from '../../src/runtime/keys.ts';
import { indexScriptKeys } from '../../src/runtime/lifecycle/keys.ts';
import { CursorError, encodeCursor, listPage } from '../../src/runtime/lifecycle/listing.ts';
import { createRedis } from '../../src/runtime/redis/index.ts';
import { Runtime } from '../../src/runtime/runtime.ts';
import { IndexBatcher, mergeUpdates } from '../../src/runtime/store/fleet-index.ts';
import { INDEX } from '../../src/runtime/store/scripts.ts';
import { SessionStore } from '../../src/runtime/store/session-store.ts';
import { startRedis, uniquePrefix, type RedisServer } from '../support/redis.ts';

describe('the fleet index (list by state, the reconciler’s activations) on a real Redis', () => {
  let server: RedisServer;
  let redis: Redis;
  let runtime: Runtime;
  let store: SessionStore;

  beforeAll(async () => {
    server = await startRedis();
    redis = createRedis(server.url, { role: 'test-index', log: () => undefined });
    const prefix = uniquePrefix('fleet-index');
    runtime = new Runtime({ connect: (role) => createRedis(server.url, { role, log: () => undefined }), prefix });
    store = new SessionStore(redis, createKeys(prefix));
  });
  afterAll(async () => {
    await runtime.close();
    redis.disconnect();
    await server.stop();
  });

  it('an ended activation removes the reconciler’s entry, but not one added after it ended', async () => {
    const { activations } = store.keys;
    await store.index('s-act', { created: true, activation: 'add', at: 1_000 });
    await store.index('s-act', { activation: 'end', at: 2_000 });
    expect(await redis.zscore(activations, 's-act')).toBeNull();

    await store.index('s-act', { activation: 'add', at: 3_000 });
    // An end that happened before that activation was added (e.g. queued in a worker's batch).
    await store.index('s-act', { activation: 'end', at: 2_500 });
    expect(await redis.zscore(activations, 's-act')).toBe('3000');
  });

  it('many sessions’ updates in one tick go in one script call, and all land', async () => {
    const sent: string[][] = [];
    const { activations } = store.keys;
    const index = indexScriptKeys(store.keys);
    const batcher = new IndexBatcher(async (_shard, args) => {
      sent.push(args);
      await redis.eval(INDEX, index.keys.length, ...index.keys, index.states, ...args);
    });
    const ids = Array.from({ length: 20 }, (_, i) => `s-batch-${i}`);
    for (const id of ids) batcher.add(id, 0, { created: true, activation: 'add', at: 5_000 });
    for (const id of ids) batcher.add(id, 0, { activation: 'end', at: 6_000 });
    await batcher.flush();
    expect(sent).toHaveLength(1);
    const listed = (await runtime.listSessions()).map((s) => s.sessionId);
    for (const id of ids) {
      expect(listed).toContain(id);
      expect(await redis.zscore(activations, id)).toBeNull();
    }
  });
});

describe('the listing over several index shards', () => {
  let server: RedisServer;
  let redis: Redis;
  let store: SessionStore;

  beforeAll(async () => {
    server = await startRedis();
    redis = createRedis(server.url, { role: 'test-shards', log: () => undefined });
    store = new SessionStore(redis, createKeys(uniquePrefix('shards')));
    // 20 sessions over 3 shards, created at times that interleave the shards (and two at the same time).
    for (let i = 0; i < 20; i += 1) {
      await redis.hset(store.key(`sh-${i}`, 'meta'), 'state', i % 2 === 0 ? 'completed' : 'failed');
      await store.index(
        `sh-${i}`,
        { created: true, state: i % 2 === 0 ? 'completed' : 'failed', at: 1_000 + (i === 19 ? 18 : i) },
        i % 3,
      );
    }
  });
  afterAll(async () => {
    redis.disconnect();
    await server.stop();
  });

  const walk = async (filter: { state?: string }, limit: number): Promise<string[]> => {
    const out: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await listPage(
        redis,
        store.keys,
        { ...filter, limit, ...(cursor === undefined ? {} : { cursor }) },
        3,
      );
      out.push(...page.sessions.map((s) => s.sessionId));
      cursor = page.next ?? undefined;
    } while (cursor !== undefined);
    return out;
  };

  it('pages merge every shard newest first, each session once, and a state filter pages that state only', async () => {
    const all = await walk({}, 3);
    expect(all).toHaveLength(20);
    expect(new Set(all).size).toBe(20);
    // Newest first; the two made at the same time in the order Redis gives equal scores (id, descending).
    expect(all.slice(0, 3)).toEqual(['sh-19', 'sh-18', 'sh-17']);
    expect(all.at(-1)).toBe('sh-0');
    expect(await walk({}, 1)).toEqual(all);
    expect(await walk({ state: 'failed' }, 4)).toEqual(all.filter((id) => Number(id.slice(3)) % 2 === 1));
  });

  it('a cursor of one shard (from before a raise of the partition count) still pages on; a made-up one is refused', async () => {
    const page = await listPage(redis, store.keys, { limit: 5, cursor: encodeCursor('sh-10', '1010') }, 3);
    expect(page.sessions.map((s) => s.sessionId)).toEqual(['sh-9', 'sh-8', 'sh-7', 'sh-6', 'sh-5']);
    await expect(
      listPage(redis, store.keys, { cursor: Buffer.from('{"p":[1]}').toString('base64url') }, 3),
    ).rejects.toBeInstanceOf(CursorError);
  });
});

describe('IndexBatcher', () => {
  const at = 1_000;

  it('keeps a batch that failed and sends it again, merged with what came after, once Redis answers', async () => {
    let fail = true;
    const sent: string[][] = [];
    const batcher = new IndexBatcher(async (_shard, args) => {
      if (fail) throw new Error('connection refused');
      sent.push(args);
    });
    batcher.add('a', 0, { created: true, activation: 'add', at });
    await batcher.flush();
    expect(sent).toEqual([]);
    fail = false;
    batcher.add('a', 0, { activation: 'end', at: at + 5 });
    batcher.add('b', 0, { activation: 'end', at });
    await batcher.flush();
    expect(sent).toEqual([['a', '1', 'end', String(at + 5), '', '', 'b', '', 'end', String(at), '', '']]);
  });

  it('sends one call per index shard, each with only its own sessions', async () => {
    const sent: Array<[number, string[]]> = [];
    const batcher = new IndexBatcher(async (shard, args) => {
      sent.push([shard, args]);
    });
    batcher.add('a', 0, { touch: true, at });
    batcher.add('b', 3, { touch: true, at });
    batcher.add('c', 3, { touch: true, at });
    await batcher.flush();
    expect(
      sent.sort((x, y) => x[0] - y[0]).map(([shard, args]) => [shard, args.filter((_, i) => i % 6 === 0)]),
    ).toEqual([
      [0, ['a']],
      [3, ['b', 'c']],
    ]);
  });

  it('merging keeps the latest activation change with its own time', () => {
    expect(mergeUpdates({ activation: 'end', at }, { created: true, at: at + 9 })).toEqual({
      created: true,
      activation: 'end',
      at,
    });
    expect(mergeUpdates({ activation: 'add', at }, { activation: 'end', at: at + 2 })).toEqual({
      activation: 'end',
      at: at + 2,
    });
  });
});
