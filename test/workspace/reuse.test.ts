import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WorkspaceQuotaError } from '../../src/workspace/index.ts';
import { git, host, tempDir, write } from './support.ts';

let tmp: { dir: string; cleanup: () => void };
let store: string;
beforeEach(() => {
  tmp = tempDir();
  store = join(tmp.dir, 'store.git');
});
afterEach(() => tmp.cleanup());

/** A snapshot's `files` or `git` tree, from the store. */
function tree(snapshot: string, name: 'files' | 'git'): string {
  return git(store, 'rev-parse', `${snapshot}:${name}`).trim();
}

/** The parents of the session's index commit in the store: its snapshots. */
function listed(sessionId: string): string[] {
  const ref = `refs/sessiond/${Buffer.from(sessionId).toString('hex')}`;
  return git(store, 'rev-parse', `${ref}^@`)
    .split('\n')
    .filter((l) => l !== '');
}

/**
 * Waits until every file written so far is older than the window in which a file's lstat is not
 * trusted (a write within it may leave the same times): 100 ms, 3 s where file times are in whole
 * seconds (record.ts). A listing then may be remembered.
 */
async function pastRacyWindow(): Promise<void> {
  const probe = join(tmp.dir, 'probe');
  writeFileSync(probe, '');
  const coarse = lstatSync(probe, { bigint: true }).mtimeNs % 1_000_000_000n === 0n;
  await new Promise((resolve) => setTimeout(resolve, coarse ? 3_200 : 300));
}

describe('work a snapshot skips (docs/workspaces.md)', () => {
  it("the agent repository's recording is reused while its files list as they did, and only then", async () => {
    const a = host(tmp.dir, 'a', store);
    const ws = await a.prepare('s1', null);
    write(ws, { 'f.txt': 'one\n' });
    git(ws, 'add', '.');
    git(ws, 'commit', '-q', '-m', 'one');
    const one = git(ws, 'rev-parse', 'HEAD').trim();
    await pastRacyWindow();
    const first = await a.snapshot('s1', 'first', null);
    // sessiond's private index of the agent repository: written by every `git add` of it.
    const gitIndex = join(tmp.dir, 'a', 'git', 'sessions', 's1', 'index-git');
    rmSync(gitIndex);
    write(ws, { 'f.txt': 'two\n' });
    const second = await a.snapshot('s1', 'second', first.id);
    // Reused: no git read the agent repository, and the snapshot holds the same tree...
    expect(existsSync(gitIndex)).toBe(false);
    expect(tree(second.id, 'git')).toBe(tree(first.id, 'git'));
    expect(tree(second.id, 'files')).not.toBe(tree(first.id, 'files'));
    // ...the one a recording from scratch makes (another instance on this host: nothing remembered).
    const scratch = await host(tmp.dir, 'a', store).snapshot('s1', 'from scratch', second.id);
    expect(existsSync(gitIndex)).toBe(true);
    expect(tree(scratch.id, 'git')).toBe(tree(first.id, 'git'));

    // A change that keeps every file's size (a branch moved back to a commit of the same id length),
    // made outside the window: only its times tell, and they do.
    git(ws, 'commit', '-q', '--allow-empty', '-m', 'two');
    await pastRacyWindow();
    const third = await a.snapshot('s1', 'third', scratch.id);
    rmSync(gitIndex);
    const branch = join(ws, '.git', 'refs', 'heads', 'main');
    expect(readFileSync(branch, 'utf8')).not.toBe(`${one}\n`);
    writeFileSync(branch, `${one}\n`);
    await pastRacyWindow();
    const fourth = await a.snapshot('s1', 'fourth', third.id);
    expect(existsSync(gitIndex)).toBe(true);
    expect(tree(fourth.id, 'git')).not.toBe(tree(third.id, 'git'));

    // Each restores on a cold host exactly as recorded.
    const b = host(tmp.dir, 'b', store);
    const wsB = await b.prepare('s1', second.id);
    expect(readFileSync(join(wsB, 'f.txt'), 'utf8')).toBe('two\n');
    expect(git(wsB, 'log', '--format=%s').trim()).toBe('one');
    expect(git(wsB, 'fsck', '--no-progress').trim()).toBe('');
    await b.prepare('s1', third.id);
    expect(git(wsB, 'log', '--format=%s').trim().split('\n')).toEqual(['two', 'one']);
    await b.prepare('s1', fourth.id);
    expect(git(wsB, 'rev-parse', 'HEAD').trim()).toBe(one);
    expect(listed('s1')).toEqual([first.id, second.id, scratch.id, third.id, fourth.id]);

    // A listing with an entry changed within the window is not kept: the snapshot after it records again.
    git(ws, 'commit', '-q', '--allow-empty', '-m', 'three');
    const fifth = await a.snapshot('s1', 'fifth', fourth.id);
    await pastRacyWindow();
    rmSync(gitIndex);
    await a.snapshot('s1', 'sixth', fifth.id);
    expect(existsSync(gitIndex)).toBe(true);
  });

  it('an index remembered by one instance and moved by another: the snapshot goes on top, none lost', async () => {
    const a = host(tmp.dir, 'a', store);
    const ws = await a.prepare('s1', null);
    write(ws, { 'f.txt': '1\n' });
    const first = await a.snapshot('s1', 'first', null);
    // Another worker process on this host takes the session's next snapshots (a takeover and back).
    const other = host(tmp.dir, 'a', store);
    write(ws, { 'f.txt': '2\n' });
    const second = await other.snapshot('s1', 'second', first.id);
    write(ws, { 'f.txt': '3\n' });
    // Its parent is not in what `a` remembers; then an index `a` did not write.
    const third = await a.snapshot('s1', 'third', second.id);
    write(ws, { 'f.txt': '4\n' });
    const fourth = await other.snapshot('s1', 'fourth', first.id);
    expect(listed('s1')).toEqual([first.id, second.id, third.id, fourth.id]);
  });

  it('maxSnapshots counts the store, not what an instance remembers of a removed session', async () => {
    const a = host(tmp.dir, 'a', store, { maxSnapshots: 2 });
    await a.prepare('s1', null);
    const first = await a.snapshot('s1', 'first', null);
    await a.snapshot('s1', 'second', first.id);
    await expect(a.snapshot('s1', 'third', first.id)).rejects.toBeInstanceOf(WorkspaceQuotaError);
    // Removed through another instance (the API's), then started again.
    await host(tmp.dir, 'a', store, { maxSnapshots: 2 }).remove('s1');
    await a.prepare('s1', null);
    const again = await a.snapshot('s1', 'again', null);
    expect(listed('s1')).toEqual([again.id]);
  });
});

describe("host-side git never reads the worker process's own git settings", () => {
  /** Saved and put back: the environment is the worker process's. */
  const saved = { ...process.env };
  afterEach(() => {
    for (const key of Object.keys(process.env)) if (!(key in saved)) delete process.env[key];
    Object.assign(process.env, saved);
  });

  it('a filter, fsmonitor, hooks path and pager from the environment, a global config or HOME never run', async () => {
    const markers = join(tmp.dir, 'markers');
    const scripts = join(tmp.dir, 'scripts');
    mkdirSync(markers);
    mkdirSync(join(scripts, 'hooks'), { recursive: true });
    const marker = (name: string): string => {
      const file = join(scripts, `${name}.sh`);
      writeFileSync(file, `#!/bin/sh\necho ran >> '${join(markers, name)}'\ncat\n`);
      chmodSync(file, 0o755);
      return file;
    };
    for (const hook of ['post-index-change', 'reference-transaction', 'post-checkout', 'pre-push']) {
      writeFileSync(join(scripts, 'hooks', hook), `#!/bin/sh\necho ran >> '${join(markers, `hook-${hook}`)}'\n`);
      chmodSync(join(scripts, 'hooks', hook), 0o755);
    }
    const settings = (prefix: string): string =>
      [
        '[core]',
        `\tfsmonitor = ${marker(`${prefix}-fsmonitor`)}`,
        `\thooksPath = ${join(scripts, 'hooks')}`,
        `\tpager = ${marker(`${prefix}-pager`)}`,
        '[filter "evil"]',
        `\tclean = ${marker(`${prefix}-clean`)}`,
        `\tsmudge = ${marker(`${prefix}-smudge`)}`,
        '\trequired = true',
      ].join('\n');
    const home = join(tmp.dir, 'home');
    mkdirSync(home);
    writeFileSync(join(home, '.gitconfig'), settings('home'));
    writeFileSync(join(tmp.dir, 'global'), settings('global'));
    process.env.HOME = home;
    process.env.XDG_CONFIG_HOME = home;
    process.env.GIT_CONFIG_GLOBAL = join(tmp.dir, 'global');
    delete process.env.GIT_CONFIG_NOSYSTEM;
    process.env.GIT_CONFIG_SYSTEM = join(tmp.dir, 'global');
    process.env.GIT_CONFIG_PARAMETERS = `'filter.evil.process'='${marker('env-process')}'`;
    process.env.GIT_CONFIG_COUNT = '1';
    process.env.GIT_CONFIG_KEY_0 = 'core.fsmonitor';
    process.env.GIT_CONFIG_VALUE_0 = marker('env-fsmonitor');

    const a = host(tmp.dir, 'a', store);
    const ws = await a.prepare('s1', null);
    write(ws, { '.gitattributes': '* filter=evil\n', 'code.txt': 'one\n' });
    const first = await a.snapshot('s1', 'first', null);
    write(ws, { 'code.txt': 'two\n' });
    const second = await a.snapshot('s1', 'second', first.id);
    await a.restore('s1', first.id);
    expect(await a.diff('s1', first.id, second.id)).toContain('+two');
    const wsB = await host(tmp.dir, 'b', store).prepare('s1', second.id);
    expect(readFileSync(join(wsB, 'code.txt'), 'utf8')).toBe('two\n');
    expect(readdirSync(markers)).toEqual([]);
    // The same settings do reach a git that inherits the environment: the markers would show a leak.
    try {
      execFileSync('git', ['status', '--porcelain'], { cwd: wsB, stdio: 'ignore' });
    } catch {
      // The marker programs speak no filter or fsmonitor protocol: git may fail after running them.
    }
    expect(readdirSync(markers).length).toBeGreaterThan(0);
  });
});
