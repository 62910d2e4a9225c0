import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKeys } from '../../../src/runtime/keys.ts';
import { sweepWorkspaces } from '../../../src/runtime/lifecycle/workspace-sweep.ts';
import { startRedis, uniquePrefix, type RedisServer } from '../../support/redis.ts';
import { existsSync, rmSync, utimesSync } from 'node:fs';
import { join } from 'node:path';
import { createWorkspaces, DEFAULT_WORKSPACE_EXCLUDE } from '../../../src/workspace/index.ts';
import { GIT_DATA_GRACE_MS } from '../../../src/runtime/lifecycle/workspace-sweep.ts';
import { git, host, refs, tempDir, write } from '../../workspace/support.ts';

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
    const config = { root: `${tmp.dir}/a/workspaces`, gitDir: `${tmp.dir}/a/git`, store };
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
    const url = { ...config, store: `file://${store}` };
    expect(await sweepWorkspaces(redis, createKeys(uniquePrefix('ws-url')), a, url, warn)).toMatchObject({
      compacted: false,
    });
  });

  it("removes the git data of sessions that no longer exist, the workers' and the callers', once it is an hour old", async () => {
    const keys = createKeys(uniquePrefix('ws-gitdata'));
    const base = join(tmp.dir, 'gitdata');
    const store = join(base, 'store.git');
    const config = { root: join(base, 'h/workspaces'), gitDir: join(base, 'h/git'), store };
    const worker = host(base, 'h', store);
    // The host's callers (an export, a diff…): their own git data under gitDir/callers.
    const caller = createWorkspaces({
      ...config,
      gitDir: join(config.gitDir, 'callers'),
      exclude: DEFAULT_WORKSPACE_EXCLUDE,
      maxBytes: 0,
      maxSnapshots: 0,
    });
    for (const id of ['gone', 'kept']) {
      const ws = await worker.prepare(id, null);
      write(ws, { 'f.txt': id });
      await caller.bundle(id, (await worker.snapshot(id, 'one', null)).id);
    }
    await redis.hset(keys.session('kept', 'meta'), 'state', 'idle');
    // `gone` was deleted, and its copy on this host removed by hand: only git data is left of it.
    rmSync(join(config.root, 'gone'), { recursive: true });
    const dirs = (id: string) => [join(config.gitDir, 'sessions', id), join(config.gitDir, 'callers', 'sessions', id)];
    const warn = (message: string, error: unknown) => {
      throw new Error(`${message}: ${String(error)}`);
    };

    // Young: an import or a fork may be writing it before its session.
    expect(await sweepWorkspaces(redis, keys, worker, config, warn)).toMatchObject({ orphans: 0 });
    expect([...dirs('gone'), ...dirs('kept')].map((d) => existsSync(d))).toEqual([true, true, true, true]);
    const old = new Date(Date.now() - GIT_DATA_GRACE_MS - 60_000);
    for (const dir of [...dirs('gone'), ...dirs('kept')]) utimesSync(dir, old, old);
    expect(refs(store)).toHaveLength(2);

    expect(await sweepWorkspaces(redis, keys, worker, config, warn)).toMatchObject({ orphans: 2 });
    expect([...dirs('gone'), ...dirs('kept')].map((d) => existsSync(d))).toEqual([false, false, true, true]);
    expect(refs(store)).toHaveLength(1);
    expect(existsSync(join(config.root, 'kept', 'f.txt'))).toBe(true);
  });
});
