import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKeys } from '../../../src/runtime/keys.ts';
import { sweepWorkspaces } from '../../../src/runtime/lifecycle/workspace-sweep.ts';
import { startRedis, uniquePrefix, type RedisServer } from '../../support/redis.ts';
import { git, host, tempDir, write } from '../../workspace/support.ts';

/**
 * The workspace sweep compacts a local store once a day per host and store, whichever of the host's
 * workers sweeps first (a real redis-server decides, a real store is packed).
 */

let server: RedisServer;
let redis: Redis;
const tmp = tempDir();
beforeAll(async () => {
  server = await startRedis();
  redis = new Redis(server.url, { maxRetriesPerRequest: 1 });
});
afterAll(async () => {
  redis.disconnect();
  await server.stop();
  tmp.cleanup();
});

/** `git count-objects -v`'s loose and packed counts. */
function objects(store: string): { loose: number; packed: number } {
  const out = git(store, 'count-objects', '-v');
  return { loose: Number(/^count: (\d+)/m.exec(out)?.[1]), packed: Number(/^in-pack: (\d+)/m.exec(out)?.[1]) };
}

describe('workspace sweep', () => {
  it("packs the local store at the first sweep, and not again at the next ones (this host's other workers included)", async () => {
    const keys = createKeys(uniquePrefix('ws-sweep'));
    const store = `${tmp.dir}/store.git`;
    const config = { root: `${tmp.dir}/a/workspaces`, store };
    const a = host(tmp.dir, 'a', store);
    // s1 exists (its copy is no orphan).
    await redis.hset(keys.session('s1', 'meta'), 'state', 'idle');
    const ws = await a.prepare('s1', null);
    write(ws, { 'one.txt': '1\n' });
    const first = await a.snapshot('s1', 'one', null);
    write(ws, { 'two.txt': '2\n' });
    await a.snapshot('s1', 'two', first.id);
    const before = objects(store);
    const warn = (message: string, error: unknown) => {
      throw new Error(`${message}: ${String(error)}`);
    };

    expect(await sweepWorkspaces(redis, keys, a, config, warn)).toEqual({ removed: 0, orphans: 0, compacted: true });
    // Everything reachable is packed; only the young unreachable ones (the index's earlier commits) stay loose.
    const packed = objects(store);
    expect(packed.packed).toBeGreaterThan(before.packed);
    expect(packed.loose).toBeLessThan(before.loose);
    write(ws, { 'three.txt': '3\n' });
    await a.snapshot('s1', 'three', first.id);
    const other = host(tmp.dir, 'a', store);
    expect(await sweepWorkspaces(redis, keys, other, config, warn)).toMatchObject({ compacted: false });
    const after = objects(store);
    expect(after.packed).toBe(packed.packed);
    expect(after.loose).toBeGreaterThan(packed.loose);
    // A URL store is never compacted by sessiond.
    const url = { root: config.root, store: `file://${store}` };
    expect(await sweepWorkspaces(redis, createKeys(uniquePrefix('ws-url')), a, url, warn)).toMatchObject({
      compacted: false,
    });
  });
});
