import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WorkspaceInputError } from '../../src/workspace/index.ts';
import { allObjectText, git, host, refs, tempDir, write } from './support.ts';

let tmp: { dir: string; cleanup: () => void };
/** The store as the hosts name it, and its path (to look inside). */
let store: string;
let storePath: string;

// A local path is used in place (objects linked, refs updated directly); a URL through push and fetch.
describe.each(['path', 'file:// URL'])('workspaces across two hosts sharing a store (%s)', (kind) => {
  beforeEach(() => {
    tmp = tempDir();
    storePath = join(tmp.dir, 'store.git');
    if (kind === 'path') store = storePath;
    else {
      git(tmp.dir, 'init', '-q', '--bare', storePath);
      store = `file://${storePath}`;
    }
  });
  afterEach(() => tmp.cleanup());

  it('a snapshot taken on host A is prepared on host B: its files, and the agent commits and branches', async () => {
    const a = host(tmp.dir, 'a', store);
    const b = host(tmp.dir, 'b', store);
    const ws = await a.prepare('s1', null);
    expect(ws).toBe(a.path('s1'));
    write(ws, { 'README.md': 'hello\n', 'src/main.ts': 'export {}\n', 'notes/draft.txt': 'untracked\n' });
    git(ws, 'add', 'README.md', 'src/main.ts');
    git(ws, 'commit', '-q', '-m', 'first');
    git(ws, 'branch', 'feature');
    const first = await a.snapshot('s1', 'turn 1 start', null);
    expect(first.parent).toBeNull();
    expect(first.label).toBe('turn 1 start');
    writeFileSync(join(ws, 'README.md'), 'hello again\n');
    git(ws, 'commit', '-q', '-am', 'second');
    const second = await a.snapshot('s1', 'turn 1 tool call_1', first.id);
    expect(second.parent).toBe(first.id);

    const wsB = await b.prepare('s1', second.id);
    expect(wsB).toBe(b.path('s1'));
    expect(readFileSync(join(wsB, 'README.md'), 'utf8')).toBe('hello again\n');
    expect(readFileSync(join(wsB, 'notes/draft.txt'), 'utf8')).toBe('untracked\n');
    expect(git(wsB, 'log', '--format=%s').trim().split('\n')).toEqual(['second', 'first']);
    expect(git(wsB, 'branch', '--format=%(refname:short)').trim().split('\n').sort()).toEqual(['feature', 'main']);
    expect(git(wsB, 'status', '--porcelain').trim()).toBe('?? notes/');

    // B extends it; A, behind, catches up on its next prepare.
    write(wsB, { 'b.txt': 'from b\n' });
    const third = await b.snapshot('s1', 'turn 2 start', second.id);
    await a.prepare('s1', third.id);
    expect(readFileSync(join(ws, 'b.txt'), 'utf8')).toBe('from b\n');
    expect(await a.diff('s1', second.id, third.id, { stat: true })).toContain('b.txt');
    expect(await a.diff('s1', null, first.id)).toContain('+hello');
  });

  it('a crash after prepare (files changed, no snapshot) is undone by the next prepare, on the same host', async () => {
    const a = host(tmp.dir, 'a', store);
    const ws = await a.prepare('s1', null);
    write(ws, { 'keep.txt': 'kept\n', 'sub/file.txt': 'one\n' });
    const snap = await a.snapshot('s1', 'turn 1 start', null, { settled: true });
    // The settled copy is at the snapshot: prepare hands it out as it is.
    expect(await a.prepare('s1', snap.id)).toBe(ws);
    write(ws, { 'keep.txt': 'half-writ', 'new/half.txt': 'partial' });
    rmSync(join(ws, 'sub/file.txt'));
    // The worker dies here: no snapshot. The next attempt prepares the same snapshot.
    await a.prepare('s1', snap.id);
    expect(readFileSync(join(ws, 'keep.txt'), 'utf8')).toBe('kept\n');
    expect(readFileSync(join(ws, 'sub/file.txt'), 'utf8')).toBe('one\n');
    expect(existsSync(join(ws, 'new'))).toBe(false);
  });

  it('a snapshot not settled leaves no marker: changes after it are undone by the next prepare', async () => {
    const a = host(tmp.dir, 'a', store);
    const ws = await a.prepare('s1', null);
    write(ws, { 'f.txt': 'v1\n' });
    const snap = await a.snapshot('s1', 'turn 1 tool call_1', null);
    write(ws, { 'f.txt': 'v2 half' });
    await a.prepare('s1', snap.id);
    expect(readFileSync(join(ws, 'f.txt'), 'utf8')).toBe('v1\n');
  });

  it('settle marks the copy at the snapshot it last held exactly (its last snapshot, a prepare), as settled would, and nothing else', async () => {
    const a = host(tmp.dir, 'a', store);
    const ws = await a.prepare('s1', null);
    write(ws, { 'f.txt': 'v1\n' });
    const first = await a.snapshot('s1', 'turn 1 tool call_1', null);
    write(ws, { 'f.txt': 'v2\n' });
    const second = await a.snapshot('s1', 'turn 1 tool call_2', first.id);
    // Not the last one taken: nothing marked (the caller snapshots instead).
    expect(await a.settle('s1', first.id)).toBe(false);
    expect(await a.settle('s1', second.id)).toBe(true);
    // Marked: the next prepare of it hands the copy out as it is (a change made meanwhile shows it).
    write(ws, { 'f.txt': 'changed by hand\n' });
    await a.prepare('s1', second.id);
    expect(readFileSync(join(ws, 'f.txt'), 'utf8')).toBe('changed by hand\n');
    // Prepared: the copy held it exactly then (an attempt that changed nothing may settle it again).
    expect(await a.settle('s1', second.id)).toBe(true);
    // Restored, or prepared anew: not known to hold any snapshot until the next prepare or snapshot.
    await a.restore('s1', first.id);
    expect(await a.settle('s1', second.id)).toBe(false);
    expect(await a.settle('s1', first.id)).toBe(false);
    await a.prepare('s1', first.id);
    expect(await a.settle('s1', first.id)).toBe(true);
    await a.prepare('s2', null);
    expect(await a.settle('s2', first.id)).toBe(false);
    // Another host never took it.
    expect(await host(tmp.dir, 'b', store).settle('s1', second.id)).toBe(false);
    await expect(a.settle('s1', 'nope')).rejects.toThrow(WorkspaceInputError);
  });

  it('restore removes a half-written file, brings back a deleted one, leaves ignored and excluded files alone', async () => {
    const a = host(tmp.dir, 'a', store);
    const ws = await a.prepare('s1', null);
    write(ws, { '.gitignore': 'build/\n', 'a.txt': 'a\n', 'dir/b.txt': 'b\n' });
    const snap = await a.snapshot('s1', 'start', null);
    write(ws, { 'half.txt': 'partial', 'build/out.o': 'ignored\n', '.env': 'TOKEN=1\n', 'a.txt': 'changed' });
    rmSync(join(ws, 'dir'), { recursive: true });
    await a.restore('s1', snap.id);
    expect(existsSync(join(ws, 'half.txt'))).toBe(false);
    expect(readFileSync(join(ws, 'a.txt'), 'utf8')).toBe('a\n');
    expect(readFileSync(join(ws, 'dir/b.txt'), 'utf8')).toBe('b\n');
    expect(readFileSync(join(ws, 'build/out.o'), 'utf8')).toBe('ignored\n');
    expect(readFileSync(join(ws, '.env'), 'utf8')).toBe('TOKEN=1\n');
  });

  it('restores the agent repository exactly: a commit made after the snapshot is gone, the repository still works', async () => {
    const a = host(tmp.dir, 'a', store);
    const ws = await a.prepare('s1', null);
    write(ws, { 'a.txt': 'a\n' });
    git(ws, 'add', '.');
    git(ws, 'commit', '-q', '-m', 'one');
    git(ws, 'gc', '-q'); // packed refs: refs/heads is empty, so git records no such directory
    const snap = await a.snapshot('s1', 'start', null);
    write(ws, { 'a.txt': 'b\n' });
    git(ws, 'commit', '-q', '-am', 'two');
    git(ws, 'tag', 'later');
    await a.restore('s1', snap.id);
    expect(git(ws, 'log', '--format=%s').trim()).toBe('one');
    expect(git(ws, 'tag').trim()).toBe('');
    expect(git(ws, 'status', '--porcelain').trim()).toBe('');
    const b = host(tmp.dir, 'b', store);
    const wsB = await b.prepare('s1', snap.id);
    expect(git(wsB, 'log', '--format=%s').trim()).toBe('one');
    expect(git(wsB, 'fsck', '--no-progress').trim()).toBe('');
  });

  it('.env and key.pem never reach a snapshot: no object in the store holds them', async () => {
    const a = host(tmp.dir, 'a', store);
    const ws = await a.prepare('s1', null);
    write(ws, {
      '.env': 'SECRET_ENV_VALUE_1\n',
      '.env.local': 'SECRET_ENV_VALUE_2\n',
      'certs/key.pem': 'SECRET_PEM_VALUE\n',
      id_ed25519: 'SECRET_KEY_VALUE\n',
      'code.ts': 'visible\n',
    });
    const snap = await a.snapshot('s1', 'start', null);
    const b = host(tmp.dir, 'b', store);
    const wsB = await b.prepare('s1', snap.id);
    expect(readFileSync(join(wsB, 'code.ts'), 'utf8')).toBe('visible\n');
    expect(existsSync(join(wsB, '.env'))).toBe(false);
    expect(existsSync(join(wsB, 'certs/key.pem'))).toBe(false);
    const everything = allObjectText(storePath);
    expect(everything).toContain('visible');
    expect(everything).not.toMatch(/SECRET_/);
    expect(allObjectText(join(tmp.dir, 'a', 'git', 'sessions', 's1', 'repo.git'))).not.toMatch(/SECRET_/);
  });

  it('two sessions never see each other: separate copies, and one cannot restore the other snapshot', async () => {
    const a = host(tmp.dir, 'a', store);
    const one = await a.prepare('one', null);
    const two = await a.prepare('two', null);
    expect(one).not.toBe(two);
    write(one, { 'mine.txt': 'one\n' });
    const snap = await a.snapshot('one', 'start', null);
    expect(existsSync(join(two, 'mine.txt'))).toBe(false);
    await expect(a.restore('two', snap.id)).rejects.toThrow(/snapshotId: no snapshot .* of session two/);
    const b = host(tmp.dir, 'b', store);
    await expect(b.prepare('two', snap.id)).rejects.toThrow(WorkspaceInputError);
  });

  it('prepare with no snapshot starts over: an empty repository, nothing of an earlier attempt', async () => {
    const a = host(tmp.dir, 'a', store);
    const ws = await a.prepare('s1', null);
    expect(existsSync(join(ws, '.git', 'HEAD'))).toBe(true);
    write(ws, { 'left.txt': 'by a crashed first attempt\n' });
    await a.prepare('s1', null);
    expect(existsSync(join(ws, 'left.txt'))).toBe(false);
  });

  it('remove deletes the copy, the git data and the session ref in the store, and no other', async () => {
    const a = host(tmp.dir, 'a', store);
    const snaps: Record<string, string> = {};
    for (const id of ['gone', 'stays']) {
      write(await a.prepare(id, null), { 'f.txt': id });
      snaps[id] = (await a.snapshot(id, 'start', null)).id;
    }
    expect(refs(storePath)).toHaveLength(2);
    await a.remove('gone');
    expect(existsSync(a.path('gone'))).toBe(false);
    expect(existsSync(join(tmp.dir, 'a', 'git', 'sessions', 'gone'))).toBe(false);
    expect(refs(storePath)).toEqual([`refs/sessiond/${Buffer.from('stays').toString('hex')}`]);
    // Removing again (or on a host that never had it) is fine; the other session is whole.
    const b = host(tmp.dir, 'b', store);
    await b.remove('gone');
    expect(readFileSync(join(await b.prepare('stays', snaps.stays ?? ''), 'f.txt'), 'utf8')).toBe('stays');
  });
});
