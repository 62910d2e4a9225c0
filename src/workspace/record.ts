import { createHash } from 'node:crypto';
import { lstatSync, readdirSync } from 'node:fs';
import { lstat, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { GitError, type Git } from './git.ts';
import type { SessionPaths } from './layout.ts';

/** Tree entry names of a snapshot's root: the working files, and the agent's repository as data. */
export const FILES = 'files';
export const AGENT_GIT = 'git';

/** Nested repositories with no commit checked out that `git add` refuses: skipped, at most this many. */
const MAX_SKIPPED_REPOS = 100;

/**
 * Records the working files (tracked and untracked, `.gitignore` respected, the exclude list
 * applied) into the private files index; returns the tree. Only files whose stat changed are hashed.
 */
async function recordFiles(git: Git, paths: SessionPaths, excludesFile: string): Promise<string> {
  const skipped: string[] = [];
  return indexTree(git, paths.repo, paths.filesIndex, async (packed) => {
    for (;;) {
      const result = await git.try(['add', '-A', '--', '.', ...skipped.map((dir) => `:(exclude,literal)${dir}`)], {
        gitDir: paths.repo,
        workTree: paths.workspace,
        indexFile: paths.filesIndex,
        cwd: paths.workspace,
        config: [`core.excludesFile=${excludesFile}`, ...packed],
      });
      if (result.exitCode === 0) return;
      // An embedded repository without a commit cannot be a gitlink: leave it out, record the rest.
      const refused = [...result.stderr.matchAll(/error: '(.+)\/' does not have a commit checked out/g)].map(
        (m) => m[1],
      );
      const fresh = refused.filter((dir): dir is string => dir !== undefined && !skipped.includes(dir));
      if (fresh.length === 0 || skipped.length + fresh.length > MAX_SKIPPED_REPOS) {
        throw new Error(`recording the workspace ${paths.workspace} failed: ${result.stderr.trim()}`);
      }
      skipped.push(...fresh);
    }
  });
}

/**
 * Adds the files into `index` (`add`, given the settings packIfFresh chose), then writes its tree.
 * An index can name an object the store no longer has: one `compact` pruned, unreachable, because
 * no snapshot recorded it (one refused over a quota) and the file has not changed since, so `add`
 * does not hash it again. `write-tree` then fails with "invalid object": the index is dropped and
 * every file hashed again, once.
 */
async function indexTree(
  git: Git,
  repo: string,
  index: string,
  add: (config: readonly string[]) => Promise<void>,
): Promise<string> {
  for (let round = 0; ; round++) {
    await add(await packIfFresh(index));
    const result = await git.try(['write-tree'], { gitDir: repo, indexFile: index });
    if (result.exitCode === 0) return result.stdout.trim();
    if (round > 0 || !/invalid object/.test(result.stderr)) {
      throw new GitError(['write-tree'], result.exitCode, result.stderr);
    }
    await rm(index, { force: true });
  }
}

/**
 * With no index yet every file is hashed: then git writes the blobs into one pack (its bulk
 * check-in, which `core.bigFileThreshold=1` turns on for every file) instead of one loose object
 * each, so a restore reads them from a pack. Later snapshots write their few new objects loose.
 */
async function packIfFresh(index: string): Promise<readonly string[]> {
  const fresh = await stat(index).then(
    () => false,
    // No index: everything is new.
    () => true,
  );
  return fresh ? ['core.bigFileThreshold=1'] : [];
}

/** Is the workspace's `.git` a real directory (not a file or a symlink)? */
export async function hasAgentRepository(workspace: string): Promise<boolean> {
  // Missing: no repository.
  const info = await lstat(join(workspace, '.git')).catch(() => null);
  return info !== null && info.isDirectory();
}

/** Entries of an agent repository `listing` reads at most (past it: no memo, `git add` looks at it). */
const MAX_LISTED_ENTRIES = 5_000;

/**
 * A file changed this close before its listing (ms) may change again with the same lstat, so such a
 * listing is not kept. File times come from the kernel's coarse clock (up to a tick, ≤ 10 ms, behind)
 * cut to the file system's granularity (1 ns on ext4, xfs, btrfs, tmpfs; 10 ms on exFAT): 100 ms is
 * ten times that. Times in whole seconds may be a file system's of 1 or 2 s (ext3, FAT): 3 s.
 */
const RACY_MS = 100;
const RACY_WHOLE_SECONDS_MS = 3_000;

/** Is an entry's mtime or ctime within the window before `now` (ms) in which it is not trusted? */
function racy(mtimeNs: bigint, ctimeNs: bigint, now: number): boolean {
  const coarse = mtimeNs % 1_000_000_000n === 0n && ctimeNs % 1_000_000_000n === 0n;
  const since = BigInt(now - (coarse ? RACY_WHOLE_SECONDS_MS : RACY_MS)) * 1_000_000n;
  return mtimeNs >= since || ctimeNs >= since;
}

/**
 * The lstat of every entry of a directory tree (path, type and mode, size, inode, mtime and ctime),
 * as one digest; null when one entry changed too recently to trust (`racy`), when there are more
 * than MAX_LISTED_ENTRIES or when the tree cannot be read. Equal digests: no file was written,
 * added, removed, renamed or replaced in between (a write sets mtime and ctime, which no one can set
 * back: ctime is always the time of the change).
 */
export function listing(root: string): string | null {
  const now = Date.now();
  const hash = createHash('sha256');
  const dirs = [''];
  let entries = 0;
  try {
    for (let dir = dirs.pop(); dir !== undefined; dir = dirs.pop()) {
      // Sorted: the digest does not depend on the order the file system lists them in.
      for (const name of readdirSync(join(root, dir)).sort()) {
        if (++entries > MAX_LISTED_ENTRIES) return null;
        const rel = dir === '' ? name : `${dir}/${name}`;
        const info = lstatSync(join(root, rel), { bigint: true });
        if (racy(info.mtimeNs, info.ctimeNs, now)) return null;
        hash.update(`${rel}\0${info.mode}\0${info.size}\0${info.ino}\0${info.mtimeNs}\0${info.ctimeNs}\n`);
        if (info.isDirectory()) dirs.push(rel);
      }
    }
  } catch {
    // Changed while listed, or unreadable: no listing (git add then records it, or says why not).
    return null;
  }
  return hash.digest('hex');
}

/** The agent repository's recorded tree and the listing of its files (`listing`) just before it was recorded. */
export interface AgentGitMemo {
  readonly listing: string;
  readonly tree: string;
}

/**
 * Records the agent's own repository (the workspace's `.git`) as plain files: every file of it,
 * its own ignore rules not applied; nothing of it is read as a repository. When its files list as
 * they did before `memo`'s recording (nothing written since), that tree is the answer and no git
 * runs. Returns the tree and the listing taken before this recording (null: none to keep).
 */
async function recordAgentRepository(
  git: Git,
  paths: SessionPaths,
  empty: string,
  memo: AgentGitMemo | undefined,
): Promise<{ tree: string; listing: string | null }> {
  if (!(await hasAgentRepository(paths.workspace))) return { tree: empty, listing: null };
  const workTree = join(paths.workspace, '.git');
  // Listed before `git add` reads the files: a change made while it runs shows in the next listing.
  const before = listing(workTree);
  if (memo !== undefined && before === memo.listing) return { tree: memo.tree, listing: before };
  const tree = await indexTree(git, paths.repo, paths.gitIndex, async (packed) => {
    await git.run(['add', '-A', '-f', '--', '.'], {
      gitDir: paths.repo,
      workTree,
      indexFile: paths.gitIndex,
      cwd: workTree,
      config: ['core.excludesFile=/dev/null', ...packed],
    });
  });
  return { tree, listing: before };
}

/**
 * Records the workspace: the working files' tree and the agent repository's, both at once (two
 * indexes, two work trees; git writes objects atomically). `memo`: the agent repository's last
 * recording, when its tree is in the store (see recordAgentRepository); `agentGitListing` is the one
 * to remember with `agentGit` once this snapshot is.
 */
export async function recordTrees(
  git: Git,
  paths: SessionPaths,
  excludesFile: string,
  empty: string,
  memo?: AgentGitMemo,
): Promise<{ files: string; agentGit: string; agentGitListing: string | null }> {
  const [files, agentGit] = await Promise.all([
    recordFiles(git, paths, excludesFile),
    recordAgentRepository(git, paths, empty, memo),
  ]);
  return { files, agentGit: agentGit.tree, agentGitListing: agentGit.listing };
}

/** The sum of the sizes of a tree's files (blobs; nested repositories' commits count 0). */
export async function treeBytes(git: Git, repo: string, tree: string): Promise<number> {
  const out = await git.run(['ls-tree', '-r', '-z', '--format=%(objectsize)', tree], { gitDir: repo });
  let total = 0;
  for (const size of out.split('\0')) {
    const n = Number(size);
    if (size !== '' && Number.isFinite(n)) total += n;
  }
  return total;
}

/** Checks that a commit is a snapshot: its tree holds exactly the two trees `files` and `git`. */
export async function isSnapshotCommit(git: Git, repo: string, commit: string): Promise<boolean> {
  const result = await git.try(['ls-tree', '-z', `${commit}^{tree}`], { gitDir: repo });
  if (result.exitCode !== 0) return false;
  const entries = result.stdout.split('\0').filter((e) => e !== '');
  const names = entries.map((e) => (e.startsWith('040000 tree ') ? e.slice(e.indexOf('\t') + 1) : null));
  return entries.length === 2 && names.includes(FILES) && names.includes(AGENT_GIT);
}
