import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { git, host, tempDir, write } from './support.ts';

let tmp: { dir: string; cleanup: () => void };
let markers: string;
beforeEach(() => {
  tmp = tempDir();
  markers = join(tmp.dir, 'markers');
  mkdirSync(markers);
});
afterEach(() => tmp.cleanup());

/** A program that leaves a marker named `name` when it runs, and passes stdin through (a filter's job). */
function marker(dir: string, name: string): string {
  const file = join(dir, `${name}.sh`);
  writeFileSync(file, `#!/bin/sh\necho ran >> '${join(markers, name)}'\ncat\n`);
  chmodSync(file, 0o755);
  return file;
}

const HOOKS = [
  'pre-commit',
  'post-commit',
  'post-checkout',
  'post-index-change',
  'reference-transaction',
  'pre-push',
  'pre-auto-gc',
  'post-merge',
];

/** Makes a repository hostile: every hook, a hooks path, an fsmonitor, filter and diff drivers its attributes use. */
function arm(repo: string, scripts: string): void {
  const dotGit = join(repo, '.git');
  mkdirSync(join(dotGit, 'hooks'), { recursive: true });
  mkdirSync(join(scripts, 'hooks'), { recursive: true });
  for (const hook of HOOKS) {
    for (const dir of [join(dotGit, 'hooks'), join(scripts, 'hooks')]) {
      writeFileSync(join(dir, hook), `#!/bin/sh\necho ran >> '${join(markers, `hook-${hook}`)}'\n`);
      chmodSync(join(dir, hook), 0o755);
    }
  }
  const config = [
    '[core]',
    `\thooksPath = ${join(scripts, 'hooks')}`,
    `\tfsmonitor = ${marker(scripts, 'fsmonitor')}`,
    `\tpager = ${marker(scripts, 'pager')}`,
    '[filter "evil"]',
    `\tclean = ${marker(scripts, 'clean')}`,
    `\tsmudge = ${marker(scripts, 'smudge')}`,
    `\tprocess = ${marker(scripts, 'process')}`,
    '\trequired = true',
    '[diff "evil"]',
    `\tcommand = ${marker(scripts, 'diff-command')}`,
    `\ttextconv = ${marker(scripts, 'textconv')}`,
    '[include]',
    `\tpath = ${join(scripts, 'included')}`,
  ].join('\n');
  writeFileSync(join(scripts, 'included'), `[core]\n\tsshCommand = ${marker(scripts, 'ssh')}\n`);
  writeFileSync(join(dotGit, 'config'), `${readFileSync(join(dotGit, 'config'), 'utf8')}\n${config}\n`);
}

describe('host-side git runs nothing a workspace configures', () => {
  it('hooks, hooksPath, fsmonitor, clean/smudge filters and a diff driver of the workspace never run', async () => {
    const store = join(tmp.dir, 'store.git');
    const a = host(tmp.dir, 'a', store);
    const ws = await a.prepare('s1', null);
    write(ws, { '.gitattributes': '* filter=evil diff=evil\n', 'code.txt': 'one\n' });
    git(ws, 'add', '.');
    git(ws, 'commit', '-q', '-m', 'one');
    // Armed after the test's own commits (which would run them): from here on only sessiond runs git.
    arm(ws, join(tmp.dir, 'scripts'));
    const first = await a.snapshot('s1', 'start', null);
    write(ws, { 'code.txt': 'two\n', 'more.txt': 'more\n' });
    const second = await a.snapshot('s1', 'tool', first.id);
    write(ws, { 'code.txt': 'half' });
    await a.restore('s1', second.id);
    await a.prepare('s1', first.id);
    expect(await a.diff('s1', first.id, second.id)).toContain('+two');
    expect(await a.diff('s1', null, second.id, { stat: true })).toContain('code.txt');
    // Another host restores the armed repository (its config and hooks arrive as plain files).
    const b = host(tmp.dir, 'b', store);
    const wsB = await b.prepare('s1', second.id);
    expect(readFileSync(join(wsB, 'code.txt'), 'utf8')).toBe('two\n');
    expect(readFileSync(join(wsB, '.git', 'config'), 'utf8')).toContain('[filter "evil"]');
    await b.snapshot('s1', 'on b', second.id);
    await a.remove('s1');
    expect(readdirSync(markers)).toEqual([]);
    // The armed repository does run them for the agent's own git: the markers would show a leak.
    write(wsB, { 'code.txt': 'three\n' });
    // (It fails: the marker programs do not speak the filter protocol.)
    expect(() => git(wsB, 'commit', '-q', '-am', 'by the agent')).toThrow(/filter/);
    expect(readdirSync(markers)).toContain('process');
  });

  it('a source repository with hooks, filters and attributes is cloned without running any of them', async () => {
    const source = join(tmp.dir, 'source');
    mkdirSync(source);
    git(source, 'init', '-q');
    write(source, { '.gitattributes': '* filter=evil diff=evil\n', 'code.txt': 'from source\n' });
    git(source, 'add', '.');
    git(source, 'commit', '-q', '-m', 'source');
    git(source, 'branch', 'topic');
    arm(source, join(tmp.dir, 'scripts'));
    const a = host(tmp.dir, 'a', join(tmp.dir, 'store.git'));
    const ws = await a.prepare('s1', null, { repo: source, ref: 'topic' });
    expect(readFileSync(join(ws, 'code.txt'), 'utf8')).toBe('from source\n');
    expect(git(ws, 'rev-parse', '--abbrev-ref', 'HEAD').trim()).toBe('topic');
    await a.snapshot('s1', 'start', null);
    expect(readdirSync(markers)).toEqual([]);
    // The clone's own config is git's, not the source's.
    expect(readFileSync(join(ws, '.git', 'config'), 'utf8')).not.toContain('evil');
  });

  it('a .git that is a symlink is never followed: not recorded, replaced by the snapshot repository on restore', async () => {
    const a = host(tmp.dir, 'a', join(tmp.dir, 'store.git'));
    const ws = await a.prepare('s1', null);
    write(ws, { 'f.txt': 'f\n' });
    const snap = await a.snapshot('s1', 'start', null);
    const outside = join(tmp.dir, 'outside');
    mkdirSync(outside);
    writeFileSync(join(outside, 'precious'), 'do not touch\n');
    rmSync(join(ws, '.git'), { recursive: true });
    symlinkSync(outside, join(ws, '.git'));
    const withLink = await a.snapshot('s1', 'link', snap.id);
    expect(git(join(tmp.dir, 'store.git'), 'ls-tree', '-r', '--name-only', withLink.id)).not.toContain('precious');
    await a.restore('s1', snap.id);
    expect(readFileSync(join(outside, 'precious'), 'utf8')).toBe('do not touch\n');
    expect(existsSync(join(ws, '.git', 'HEAD'))).toBe(true);
  });
});
