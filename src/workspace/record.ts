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

/**
 * Records the agent's own repository (the workspace's `.git`) as plain files: every file of it,
 * its own ignore rules not applied; nothing of it is read as a repository.
 */
async function recordAgentRepository(git: Git, paths: SessionPaths, empty: string): Promise<string> {
  if (!(await hasAgentRepository(paths.workspace))) return empty;
  const workTree = join(paths.workspace, '.git');
  return indexTree(git, paths.repo, paths.gitIndex, async (packed) => {
    await git.run(['add', '-A', '-f', '--', '.'], {
      gitDir: paths.repo,
      workTree,
      indexFile: paths.gitIndex,
      cwd: workTree,
      config: ['core.excludesFile=/dev/null', ...packed],
    });
  });
}

/**
 * Records the workspace: the working files' tree and the agent repository's, both at once (two
 * indexes, two work trees; git writes objects atomically).
 */
export async function recordTrees(
  git: Git,
  paths: SessionPaths,
  excludesFile: string,
  empty: string,
): Promise<{ files: string; agentGit: string }> {
  const [files, agentGit] = await Promise.all([
    recordFiles(git, paths, excludesFile),
    recordAgentRepository(git, paths, empty),
  ]);
  return { files, agentGit };
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
