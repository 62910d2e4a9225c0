import { chmodSync, existsSync, lstatSync, mkdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { allObjectText, git, host, tempDir, write } from './support.ts';

let tmp: { dir: string; cleanup: () => void };
let store: string;
beforeEach(() => {
  tmp = tempDir();
  store = join(tmp.dir, 'store.git');
});
afterEach(() => tmp.cleanup());

/** The paths a snapshot's working files hold, from the store. */
function recorded(snapshot: string): string[] {
  return git(store, 'ls-tree', '-r', '--name-only', `${snapshot}:files`)
    .split('\n')
    .filter((l) => l !== '');
}

describe('what a snapshot captures (docs/workspaces.md)', () => {
  it('a nested repository: as the commit it is at when it has one, left out when not; its files never', async () => {
    const a = host(tmp.dir, 'a', store);
    const ws = await a.prepare('s1', null);
    write(ws, { 'top.txt': 'top\n', 'fresh/inner.txt': 'not recorded\n', 'cloned/lib.txt': 'lib\n' });
    git(join(ws, 'fresh'), 'init', '-q');
    git(join(ws, 'cloned'), 'init', '-q');
    git(join(ws, 'cloned'), 'add', '.');
    git(join(ws, 'cloned'), 'commit', '-q', '-m', 'lib');
    const head = git(join(ws, 'cloned'), 'rev-parse', 'HEAD').trim();
    const snap = await a.snapshot('s1', 'start', null);
    expect(recorded(snap.id)).toEqual(['cloned', 'top.txt']);
    expect(git(store, 'ls-tree', `${snap.id}:files`, 'cloned')).toContain(`160000 commit ${head}`);
    const wsB = await host(tmp.dir, 'b', store).prepare('s1', snap.id);
    expect(readFileSync(join(wsB, 'top.txt'), 'utf8')).toBe('top\n');
    expect(existsSync(join(wsB, 'cloned', 'lib.txt'))).toBe(false);
    expect(existsSync(join(wsB, 'fresh'))).toBe(false);
    // On the host that has them, a restore leaves nested repositories as they are.
    await a.restore('s1', snap.id);
    expect(readFileSync(join(ws, 'fresh/inner.txt'), 'utf8')).toBe('not recorded\n');
  });

  it('symlinks as links (never followed), the executable bit, and a .git that is a file is not recorded', async () => {
    const a = host(tmp.dir, 'a', store);
    const ws = await a.prepare('s1', null);
    const outside = join(tmp.dir, 'outside.txt');
    writeFileSync(outside, 'OUTSIDE_CONTENT\n');
    symlinkSync(outside, join(ws, 'link'));
    write(ws, { 'run.sh': '#!/bin/sh\n' });
    chmodSync(join(ws, 'run.sh'), 0o755);
    const snap = await a.snapshot('s1', 'start', null);
    const wsB = await host(tmp.dir, 'b', store).prepare('s1', snap.id);
    expect(lstatSync(join(wsB, 'link')).isSymbolicLink()).toBe(true);
    expect(readlinkSync(join(wsB, 'link'))).toBe(outside);
    expect(statSync(join(wsB, 'run.sh')).mode & 0o111).not.toBe(0);
    expect(allObjectText(store)).not.toContain('OUTSIDE_CONTENT');

    const worktreePointer = join(tmp.dir, 'elsewhere');
    mkdirSync(worktreePointer);
    rmSync(join(ws, '.git'), { recursive: true });
    writeFileSync(join(ws, '.git'), `gitdir: ${worktreePointer}\n`);
    const pointer = await a.snapshot('s1', 'pointer', snap.id);
    expect(git(store, 'ls-tree', `${pointer.id}:git`).trim()).toBe('');
    await a.restore('s1', snap.id);
    expect(statSync(join(ws, '.git')).isDirectory()).toBe(true);
    expect(git(ws, 'rev-parse', '--git-dir').trim()).toBe('.git');
  });

  it('restore turns a directory back into a file and a file back into a directory', async () => {
    const a = host(tmp.dir, 'a', store);
    const ws = await a.prepare('s1', null);
    write(ws, { 'was-file': 'file\n', 'was-dir/inner.txt': 'inner\n' });
    const snap = await a.snapshot('s1', 'start', null);
    rmSync(join(ws, 'was-file'));
    write(ws, { 'was-file/nested.txt': 'now a dir\n' });
    rmSync(join(ws, 'was-dir'), { recursive: true });
    writeFileSync(join(ws, 'was-dir'), 'now a file\n');
    await a.restore('s1', snap.id);
    expect(readFileSync(join(ws, 'was-file'), 'utf8')).toBe('file\n');
    expect(readFileSync(join(ws, 'was-dir/inner.txt'), 'utf8')).toBe('inner\n');
  });
});
