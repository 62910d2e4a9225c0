import { randomBytes } from 'node:crypto';
import {
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
  type Stats,
} from 'node:fs';
import { join, resolve } from 'node:path';
import { helperCacheDir } from './helper-binary.ts';

/**
 * The /etc a bwrap sandbox shows, as one bind instead of one per entry. bubblewrap re-reads the
 * whole mount table (`/proc/self/mountinfo`) after every bind it makes, so each bind costs the
 * attempt ~0.15-0.2 ms of CPU, and the curated /etc was 26 of them (~4 ms of the ~12 ms bubblewrap
 * and sessiond's init took around `/bin/true`, measured with `perf stat`; BENCHMARKS.md).
 *
 * The view is a directory of this worker process (`<cache>/etc/<pid>-<random>/view`) holding a copy of each
 * listed /etc entry that is a file, the same symlink for each one that is a symlink into the system
 * dirs (visible in the sandbox), and an empty directory for each one that is a directory: the view
 * is bound read-only at /etc, then those directories on top of it, each read-only as before.
 *
 * Kept current: before every attempt each listed entry is stat'ed (links followed) and a copy whose
 * source changed since it was made (device, inode, size, mtime, ctime, mode) is made again (written
 * aside, then renamed in: a sandbox that is running sees the new file whole, as it would not
 * through a bind of the old file); an entry that disappeared is removed from the view. A worker
 * process copies every entry once, at its first sandboxed attempt; views of workers that are gone
 * are removed then. Copies are owned by the worker's user (the originals show as `nobody` in the
 * sandbox's user namespace), with the originals' permission bits; the bind is read-only, so the
 * agent can change neither. A file the worker cannot read is left out, as the agent could not read it.
 */

/** What was copied into the view, per entry name: the source's signature at that time ('dir' for a mount point). */
const copied = new Map<string, string>();
let root: string | undefined;

type Kind = 'dir' | 'file' | 'link';

/**
 * The bwrap arguments that show `entries` (names under `from`: the host's /etc, another dir in tests)
 * through the view: the view at /etc, then its directories. An entry that is a symlink to a path
 * `visible` in the sandbox (under the system dirs) stays a symlink with the same text: /etc/localtime
 * as a copy (or a bind of its target) was a regular file, and ICU (Node) then found the time zone's
 * name by reading every file of /usr/share/zoneinfo, ~7 ms of CPU at each Node start (measured).
 */
export function etcViewBinds(
  entries: readonly string[],
  visible: (path: string) => boolean,
  from = '/etc',
): string[][] {
  const view = prepareView();
  const binds: string[][] = [['--ro-bind', view, '/etc']];
  for (const entry of entries) {
    const source = join(from, entry);
    const target = join(view, entry);
    const link = visibleLink(source, visible);
    const stats = link === null ? statOrNull(source) : null;
    const kind: Kind | null =
      link !== null ? 'link' : stats === null ? null : stats.isDirectory() ? 'dir' : stats.isFile() ? 'file' : null;
    if (kind === null) {
      forget(entry, target);
      continue;
    }
    const signature = kind === 'link' ? `link:${link ?? ''}` : kind === 'dir' ? 'dir' : signatureOf(stats as Stats);
    if (copied.get(entry) !== signature && !refresh(entry, source, target, kind, stats, link)) continue;
    copied.set(entry, signature);
    if (kind === 'dir') binds.push(['--ro-bind', source, `/etc/${entry}`]);
  }
  return binds;
}

/** The text of `source` when it is a symlink whose first hop (from /etc) and final target are both `visible`; else null. */
function visibleLink(source: string, visible: (path: string) => boolean): string | null {
  try {
    if (!lstatSync(source).isSymbolicLink()) return null;
    const text = readlinkSync(source);
    return visible(resolve('/etc', text)) && visible(realpathSync(source)) ? text : null;
  } catch {
    // Gone, or a dangling link: not a link the sandbox can follow (a dangling one is left out below).
    return null;
  }
}

/** The view dir, made (and the views of gone worker processes removed) at first use; made again if removed since. */
function prepareView(): string {
  if (root === undefined) {
    const parent = join(helperCacheDir(), 'etc');
    mkdirSync(parent, { recursive: true, mode: 0o700 });
    removeGoneViews(parent);
    // The pid names whose view it is; the random part keeps apart processes of one pid (one that ran
    // before with this pid, or one in another PID namespace sharing this cache).
    root = join(parent, `${process.pid}-${randomBytes(4).toString('hex')}`);
  }
  const view = join(root, 'view');
  if (lstatOrNull(view) === null) {
    copied.clear();
    mkdirSync(view, { recursive: true, mode: 0o755 });
    mkdirSync(join(root, 'staging'), { recursive: true, mode: 0o700 });
  }
  return view;
}

/** Copies (file), links (link) or makes a mount point for (dir) `entry`; false when it cannot (then it is left out). */
function refresh(
  entry: string,
  source: string,
  target: string,
  kind: Kind,
  stats: Stats | null,
  link: string | null,
): boolean {
  try {
    const current = lstatOrNull(target);
    if (kind === 'dir') {
      if (current?.isDirectory() !== true) {
        rmSync(target, { recursive: true, force: true });
        mkdirSync(target, { recursive: true });
      }
      return true;
    }
    const staged = join(root ?? '', 'staging', entry);
    rmSync(staged, { force: true });
    if (kind === 'link') symlinkSync(link ?? '', staged);
    else {
      writeFileSync(staged, readFileSync(source), { mode: (stats?.mode ?? 0o644) & 0o7777 });
      if (stats !== null) utimesSync(staged, stats.atime, stats.mtime);
    }
    if (current?.isDirectory() === true) rmSync(target, { recursive: true, force: true });
    renameSync(staged, target);
    return true;
  } catch {
    // Unreadable here (EACCES) or gone since the stat: the agent goes without it, as it would have.
    forget(entry, target);
    return false;
  }
}

function forget(entry: string, target: string): void {
  if (!copied.has(entry) && lstatOrNull(target) === null) return;
  copied.delete(entry);
  rmSync(target, { recursive: true, force: true });
}

function signatureOf(stats: Stats): string {
  return [stats.dev, stats.ino, stats.size, stats.mtimeMs, stats.ctimeMs, stats.mode].join(':');
}

function statOrNull(path: string): Stats | null {
  try {
    return statSync(path);
  } catch {
    // Absent (or unreadable): shown as absent.
    return null;
  }
}

function lstatOrNull(path: string): Stats | null {
  try {
    return lstatSync(path);
  } catch {
    // Absent: nothing in the view there.
    return null;
  }
}

/** Views of worker processes that are no longer running (a view is a pid's). */
function removeGoneViews(parent: string): void {
  let names: string[];
  try {
    names = readdirSync(parent);
  } catch {
    // Nothing there yet.
    return;
  }
  for (const name of names) {
    const pid = /^(\d+)-[0-9a-f]+$/.exec(name)?.[1];
    if (pid === undefined || Number(pid) === process.pid || isRunning(Number(pid))) continue;
    rmSync(join(parent, name), { recursive: true, force: true });
  }
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it runs, as another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Forgets what was copied (tests that change the view under a running process). */
export function resetEtcView(): void {
  copied.clear();
  root = undefined;
}
