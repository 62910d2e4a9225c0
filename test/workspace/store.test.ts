import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, utimesSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WorkspaceInputError, WorkspaceQuotaError } from '../../src/workspace/index.ts';
import { freePort, killWithTestProcess } from '../support/redis.ts';
import { allObjectText, git, host, refs, tempDir, write } from './support.ts';

let tmp: { dir: string; cleanup: () => void };
beforeEach(() => {
  tmp = tempDir();
});
afterEach(() => tmp.cleanup());

async function listening(port: number, deadline: number): Promise<void> {
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.end();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`git daemon did not listen on ${port}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('the store through git daemon', () => {
  let daemon: ChildProcess | undefined;
  afterEach(async () => {
    if (daemon?.pid !== undefined && daemon.exitCode === null) {
      const exited = new Promise((resolve) => daemon?.once('exit', resolve));
      daemon.kill('SIGTERM');
      await exited;
    }
  });

  it('snapshots on host A reach host B through git://, and remove deletes them there', async () => {
    const base = join(tmp.dir, 'served');
    git(tmp.dir, 'init', '-q', '--bare', join(base, 'store.git'));
    const port = await freePort();
    daemon = spawn(
      'git',
      ['daemon', '--reuseaddr', '--enable=receive-pack', `--base-path=${base}`, '--export-all'].concat([
        `--listen=127.0.0.1`,
        `--port=${port}`,
        base,
      ]),
      { stdio: 'ignore', env: { PATH: process.env.PATH ?? '/usr/bin:/bin', GIT_CONFIG_NOSYSTEM: '1', HOME: tmp.dir } },
    );
    if (daemon.pid !== undefined) killWithTestProcess(daemon.pid);
    await listening(port, Date.now() + 20_000);
    const url = `git://127.0.0.1:${port}/store.git`;
    const a = host(tmp.dir, 'a', url);
    const b = host(tmp.dir, 'b', url);
    const ws = await a.prepare('s1', null);
    write(ws, { 'a.txt': 'over git://\n' });
    git(ws, 'add', '.');
    git(ws, 'commit', '-q', '-m', 'agent commit');
    const first = await a.snapshot('s1', 'start', null);
    write(ws, { 'b.txt': 'second\n' });
    const second = await a.snapshot('s1', 'tool', first.id);
    const wsB = await b.prepare('s1', second.id);
    expect(readFileSync(join(wsB, 'a.txt'), 'utf8')).toBe('over git://\n');
    expect(readFileSync(join(wsB, 'b.txt'), 'utf8')).toBe('second\n');
    expect(git(wsB, 'log', '--format=%s').trim()).toBe('agent commit');
    expect(refs(join(base, 'store.git'))).toHaveLength(1);
    await b.remove('s1');
    expect(refs(join(base, 'store.git'))).toEqual([]);
  });
});

describe('quotas', () => {
  it('over maxBytes: WorkspaceQuotaError, nothing recorded, the copy as it was', async () => {
    const store = join(tmp.dir, 'store.git');
    const a = host(tmp.dir, 'a', store, { maxBytes: 10_000 });
    const ws = await a.prepare('s1', null);
    write(ws, { 'small.txt': 'small\n' });
    const first = await a.snapshot('s1', 'start', null);
    const before = git(store, 'for-each-ref', '--format=%(objectname)');
    write(ws, { 'big.bin': 'x'.repeat(20_000) });
    const error = await a.snapshot('s1', 'tool', first.id).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WorkspaceQuotaError);
    expect(error).toMatchObject({ field: 'maxBytes', limit: 10_000 });
    expect((error as WorkspaceQuotaError).actual).toBeGreaterThan(20_000);
    expect(git(store, 'for-each-ref', '--format=%(objectname)')).toBe(before);
    expect(readFileSync(join(ws, 'big.bin'), 'utf8')).toHaveLength(20_000);
  });

  it('over maxSnapshots: WorkspaceQuotaError, the store index unchanged', async () => {
    const store = join(tmp.dir, 'store.git');
    const a = host(tmp.dir, 'a', store, { maxSnapshots: 2 });
    const ws = await a.prepare('s1', null);
    write(ws, { 'f.txt': '1' });
    const first = await a.snapshot('s1', 'one', null);
    write(ws, { 'f.txt': '2' });
    const second = await a.snapshot('s1', 'two', first.id);
    const before = git(store, 'for-each-ref', '--format=%(objectname)');
    write(ws, { 'f.txt': '3' });
    await expect(a.snapshot('s1', 'three', second.id)).rejects.toMatchObject({
      field: 'maxSnapshots',
      limit: 2,
      actual: 3,
    });
    expect(git(store, 'for-each-ref', '--format=%(objectname)')).toBe(before);
    expect(readFileSync(join(ws, 'f.txt'), 'utf8')).toBe('3');
  });
});

describe('copy, bundle and unbundle', () => {
  it('copy makes a snapshot of A the first of B: B has the files, and keeps them after A is removed', async () => {
    const store = join(tmp.dir, 'store.git');
    const a = host(tmp.dir, 'a', store);
    const ws = await a.prepare('A', null);
    write(ws, { 'turn1.txt': 'one\n' });
    const t1 = await a.snapshot('A', 'turn 1', null);
    write(ws, { 'turn2.txt': 'two\n' });
    await a.snapshot('A', 'turn 2', t1.id);
    const forked = await a.copy('A', t1.id, 'B');
    await a.remove('A');
    const b = host(tmp.dir, 'b', store);
    const wsB = await b.prepare('B', forked);
    expect(readFileSync(join(wsB, 'turn1.txt'), 'utf8')).toBe('one\n');
    expect(() => readFileSync(join(wsB, 'turn2.txt'))).toThrow();
    await expect(b.prepare('A', t1.id)).rejects.toThrow(/snapshot: no snapshot/);
  });

  it('bundle → unbundle into a fresh store: the same snapshot ids, files and agent history', async () => {
    const a = host(tmp.dir, 'a', join(tmp.dir, 'store.git'));
    const ws = await a.prepare('s1', null);
    write(ws, { 'a.txt': 'exported\n' });
    git(ws, 'add', '.');
    git(ws, 'commit', '-q', '-m', 'agent');
    const first = await a.snapshot('s1', 'one', null);
    write(ws, { 'b.txt': 'two\n' });
    const second = await a.snapshot('s1', 'two', first.id);
    const bundle = await a.bundle('s1', second.id);
    const c = host(tmp.dir, 'c', join(tmp.dir, 'other-store.git'));
    expect(await c.unbundle('s1', bundle)).toBe(second.id);
    const wsC = await c.prepare('s1', second.id);
    expect(readFileSync(join(wsC, 'b.txt'), 'utf8')).toBe('two\n');
    expect(git(wsC, 'log', '--format=%s').trim()).toBe('agent');
    await c.prepare('s1', first.id);
    expect(() => readFileSync(join(wsC, 'b.txt'))).toThrow();
  });

  it('bundles of one session taken at once (two exports) each carry their own snapshot', async () => {
    const a = host(tmp.dir, 'a', join(tmp.dir, 'store.git'));
    const ws = await a.prepare('s1', null);
    write(ws, { 'a.txt': 'one\n' });
    const first = await a.snapshot('s1', 'one', null);
    write(ws, { 'a.txt': 'two\n' });
    const second = await a.snapshot('s1', 'two', first.id);
    const ids = Array.from({ length: 12 }, (_, i) => (i % 2 === 0 ? first.id : second.id));
    const bundles = await Promise.all(ids.map((id) => a.bundle('s1', id)));
    for (const [i, bundle] of bundles.entries()) {
      const c = host(tmp.dir, `c${i}`, join(tmp.dir, `other-${i}.git`));
      expect(await c.unbundle('s1', bundle)).toBe(ids[i]);
    }
  });

  it("a bundle whose files are over this deployment's maxBytes is refused, nothing stored", async () => {
    const a = host(tmp.dir, 'a', join(tmp.dir, 'store.git'));
    const ws = await a.prepare('s1', null);
    write(ws, { 'big.txt': 'x'.repeat(5000) });
    const bundle = await a.bundle('s1', (await a.snapshot('s1', 'one', null)).id);
    const c = host(tmp.dir, 'c', join(tmp.dir, 'small.git'), { maxBytes: 4096 });
    const error = await c.unbundle('s1', bundle).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WorkspaceQuotaError);
    expect(error).toMatchObject({ field: 'maxBytes' });
    expect(refs(join(tmp.dir, 'small.git'))).toEqual([]);
    const d = host(tmp.dir, 'd', join(tmp.dir, 'large.git'), { maxBytes: 8192 });
    expect(await d.unbundle('s1', bundle)).toMatch(/^[0-9a-f]{40}$/);
  });

  it('a corrupt bundle, a truncated one and a non-bundle are refused, naming the bundle', async () => {
    const a = host(tmp.dir, 'a', join(tmp.dir, 'store.git'));
    const ws = await a.prepare('s1', null);
    write(ws, { 'a.txt': 'x'.repeat(5000) });
    const snap = await a.snapshot('s1', 'one', null);
    const bundle = await a.bundle('s1', snap.id);
    const c = host(tmp.dir, 'c', join(tmp.dir, 'other.git'));
    const corrupt = Buffer.from(bundle);
    for (let i = corrupt.length - 200; i < corrupt.length - 30; i++) corrupt[i] = (corrupt[i] ?? 0) ^ 0xff;
    for (const bad of [corrupt, bundle.subarray(0, bundle.length - 100), Buffer.from('not a bundle\n\n')]) {
      const error = await c.unbundle('s1', bad).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(WorkspaceInputError);
      expect(error).toMatchObject({ field: 'bundle' });
    }
    expect(refs(join(tmp.dir, 'other.git'))).toEqual([]);
    // A git bundle that is not a snapshot's.
    git(ws, 'add', '.');
    git(ws, 'commit', '-q', '-m', 'plain');
    git(ws, 'update-ref', 'refs/sessiond/snapshot', 'HEAD');
    git(ws, 'bundle', 'create', '-q', join(tmp.dir, 'plain.bundle'), 'refs/sessiond/snapshot');
    await expect(c.unbundle('s1', readFileSync(join(tmp.dir, 'plain.bundle')))).rejects.toThrow(
      /^bundle: commit .* is not a workspace snapshot/,
    );
  });
});

describe('bad inputs name the field', () => {
  it('session ids, snapshot ids, sources, refs, labels and the config', async () => {
    const a = host(tmp.dir, 'a', join(tmp.dir, 'store.git'));
    await expect(a.prepare('../x', null)).rejects.toMatchObject({ field: 'sessionId' });
    await expect(a.prepare('s1', 'nope')).rejects.toMatchObject({ field: 'snapshot' });
    await expect(a.prepare('s1', 'a'.repeat(40))).rejects.toThrow(/^snapshot: no snapshot a{40} of session s1/);
    const notRepo = join(tmp.dir, 'plain-dir');
    write(notRepo, { 'file.txt': 'x' });
    await expect(a.prepare('s1', null, { repo: notRepo })).rejects.toThrow(/^source\.repo: cannot clone/);
    const source = join(tmp.dir, 'source');
    write(source, { 'f.txt': 'f' });
    git(source, 'init', '-q');
    git(source, 'add', '.');
    git(source, 'commit', '-q', '-m', 'x');
    await expect(a.prepare('s1', null, { repo: source, ref: 'no-such-branch' })).rejects.toThrow(
      /^source\.ref: no branch, tag or commit "no-such-branch"/,
    );
    await expect(a.prepare('s1', null, { repo: source, ref: '--upload-pack=x' })).rejects.toMatchObject({
      field: 'source.ref',
    });
    const ws = await a.prepare('s1', null, { repo: `file://${source}` });
    expect(readFileSync(join(ws, 'f.txt'), 'utf8')).toBe('f');
    await expect(a.snapshot('s1', 'two\nlines', null)).rejects.toMatchObject({ field: 'label' });
    await expect(a.restore('s1', 'b'.repeat(40))).rejects.toMatchObject({ field: 'snapshotId' });
    await expect(a.snapshot('never-prepared', 'x', null)).rejects.toMatchObject({ field: 'sessionId' });
    expect(() => host(tmp.dir, 'a', 'relative/store')).toThrow(/^store: /);
    expect(() => host(tmp.dir, 'a', join(tmp.dir, 's.git'), { maxBytes: -1 })).toThrow(/^maxBytes: /);
    expect(() => host(tmp.dir, 'a', join(tmp.dir, 's.git'), { gitDir: join(tmp.dir, 'a', 'workspaces', 'g') })).toThrow(
      /^gitDir: /,
    );
    writeFileSync(join(tmp.dir, 'unused'), '');
  });
});

describe('compaction of a local store', () => {
  it("drops a removed session's objects and keeps every snapshot of the others restorable", async () => {
    const store = join(tmp.dir, 'store.git');
    const a = host(tmp.dir, 'a', store);
    const gone = await a.prepare('gone', null);
    write(gone, { 'secret-of-gone.txt': 'only in the removed session\n' });
    await a.snapshot('gone', 'start', null);
    const kept = await a.prepare('kept', null);
    write(kept, { 'notes.txt': 'kept session, first\n' });
    const first = await a.snapshot('kept', 'one', null);
    write(kept, { 'notes.txt': 'kept session, second\n' });
    const second = await a.snapshot('kept', 'two', first.id);
    await a.remove('gone');
    expect(allObjectText(store)).toContain('only in the removed session');

    expect(await a.compact(0)).toBe(true);
    const text = allObjectText(store);
    expect(text).not.toContain('only in the removed session');
    expect(text).toContain('kept session, first');
    const b = host(tmp.dir, 'b', store);
    const copy = await b.prepare('kept', first.id);
    expect(readFileSync(join(copy, 'notes.txt'), 'utf8')).toBe('kept session, first\n');
    await b.restore('kept', second.id);
    expect(readFileSync(join(copy, 'notes.txt'), 'utf8')).toBe('kept session, second\n');
  });

  it('a snapshot after a refused one whose objects were pruned records the unchanged file again', async () => {
    const store = join(tmp.dir, 'store.git');
    const small = host(tmp.dir, 'a', store, { maxBytes: 10_000 });
    const ws = await small.prepare('s1', null);
    write(ws, { 'small.txt': 'small\n' });
    const first = await small.snapshot('s1', 'start', null);
    write(ws, { 'big.bin': `${'y'.repeat(20_000)}\n` });
    // Older than the index written next, so a later `git add` trusts the index and does not hash it again.
    const past = new Date(Date.now() - 3_600_000);
    utimesSync(join(ws, 'big.bin'), past, past);
    await expect(small.snapshot('s1', 'tool', first.id)).rejects.toBeInstanceOf(WorkspaceQuotaError);
    expect(await small.compact(0)).toBe(true);
    expect(allObjectText(store)).not.toContain('y'.repeat(100));

    // The same host with a larger quota (the deployment raised it): the file is recorded whole.
    const large = host(tmp.dir, 'a', store);
    const next = await large.snapshot('s1', 'tool', first.id);
    const b = host(tmp.dir, 'b', store);
    const copy = await b.prepare('s1', next.id);
    expect(readFileSync(join(copy, 'big.bin'), 'utf8')).toHaveLength(20_001);
  });

  it('drops the snapshot list of a session that is gone (a removal that raced a snapshot), once it is older than the grace', async () => {
    const store = join(tmp.dir, 'store.git');
    const a = host(tmp.dir, 'a', store);
    for (const id of ['ghost', 'alive']) {
      write(await a.prepare(id, null), { [`${id}.txt`]: `content of ${id}\n` });
      await a.snapshot(id, 'start', null);
    }
    const asked: string[] = [];
    const exists = (ids: readonly string[]) => {
      asked.push(...ids);
      return Promise.resolve(ids.map((id) => id !== 'ghost'));
    };
    // Younger than the grace: kept, whatever `exists` says.
    expect(await a.compact(3_600_000, exists)).toBe(true);
    expect(refs(store)).toHaveLength(2);
    expect(asked).toEqual([]);

    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(await a.compact(0, exists)).toBe(true);
    expect(asked.sort()).toEqual(['alive', 'ghost']);
    expect(refs(store)).toHaveLength(1);
    const text = allObjectText(store);
    expect(text).not.toContain('content of ghost');
    expect(text).toContain('content of alive');
  });

  it("can be a host's first call (a worker's first sweep runs before any attempt), the store not made yet", async () => {
    const store = join(tmp.dir, 'store.git');
    expect(await host(tmp.dir, 'a', store).compact(0)).toBe(true);
    // Another host of the same store, its first call too: the store exists now.
    const b = host(tmp.dir, 'b', store);
    expect(await b.compact(0, (ids) => Promise.resolve(ids.map(() => true)))).toBe(true);
    write(await b.prepare('s1', null), { 'notes.txt': 'after the compaction\n' });
    const first = await b.snapshot('s1', 'start', null);
    const copy = await host(tmp.dir, 'a', store).prepare('s1', first.id);
    expect(readFileSync(join(copy, 'notes.txt'), 'utf8')).toBe('after the compaction\n');
  });

  it('a URL store is left to its server; a bad grace is refused naming it', async () => {
    const store = join(tmp.dir, 'store.git');
    git(tmp.dir, 'init', '--quiet', '--bare', store);
    const a = host(tmp.dir, 'a', `file://${store}`);
    expect(await a.compact(0)).toBe(false);
    await expect(a.compact(-1)).rejects.toMatchObject({ field: 'graceMs' });
  });
});
