import { lstat, mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Git } from './git.ts';
import type { SessionPaths } from './layout.ts';
import { AGENT_GIT, FILES, hasAgentRepository } from './record.ts';

/** Directories git does not record but a repository needs to be one (`objects`, `refs`). */
const REPOSITORY_SKELETON = ['objects/info', 'objects/pack', 'refs/heads', 'refs/tags'];

/**
 * Makes the workspace's working files exactly the snapshot's: changed and deleted files back, extra
 * untracked files that are not ignored removed. Ignored files (the workspace's `.gitignore`, the
 * exclude list) are left as they are.
 */
async function restoreFiles(
  git: Git,
  paths: SessionPaths,
  snapshot: string,
  excludesFile: string,
  fresh: boolean,
): Promise<void> {
  const call = {
    gitDir: paths.repo,
    workTree: paths.workspace,
    indexFile: paths.filesIndex,
    cwd: paths.workspace,
    config: [`core.excludesFile=${excludesFile}`],
  };
  // --reset -u rewrites every file whose stat differs from the index, and removes the index's
  // files the snapshot lacks; clean then removes what the index never held (nothing, in a
  // directory that did not exist before this restore).
  await git.run(['read-tree', '--reset', '-u', `${snapshot}:${FILES}`], call);
  if (!fresh) await git.run(['clean', '-f', '-d', '-q', '--', '.'], call);
}

/** Makes the workspace's `.git` exactly the snapshot's (every file; nothing of it is run or read as config). */
async function restoreAgentRepository(git: Git, paths: SessionPaths, snapshot: string, empty: string): Promise<void> {
  const target = join(paths.workspace, '.git');
  const tree = (await git.run(['rev-parse', `${snapshot}:${AGENT_GIT}`], { gitDir: paths.repo })).trim();
  const fresh = await lstat(target).then(
    () => false,
    // Nothing in its place yet: nothing to clean after the checkout.
    () => true,
  );
  if (!(await hasAgentRepository(paths.workspace))) {
    // A file or a symlink in its place is never followed: removed.
    await rm(target, { recursive: true, force: true });
    await rm(paths.gitIndex, { force: true });
  }
  if (tree === empty) {
    await rm(target, { recursive: true, force: true });
    await rm(paths.gitIndex, { force: true });
    return;
  }
  await mkdir(target, { recursive: true });
  const call = {
    gitDir: paths.repo,
    workTree: target,
    indexFile: paths.gitIndex,
    cwd: target,
    config: ['core.excludesFile=/dev/null'],
  };
  await git.run(['read-tree', '--reset', '-u', tree], call);
  if (!fresh) await git.run(['clean', '-f', '-d', '-x', '-q', '--', '.'], call);
  for (const dir of REPOSITORY_SKELETON) await mkdir(join(target, dir), { recursive: true });
}

/** Restores the workspace to a snapshot present in the private repository. */
export async function restoreTree(
  git: Git,
  paths: SessionPaths,
  snapshot: string,
  excludesFile: string,
  empty: string,
): Promise<void> {
  // mkdir returns the first directory it made: the workspace did not exist, so it holds nothing but the snapshot.
  const fresh = (await mkdir(paths.workspace, { recursive: true })) !== undefined;
  await restoreFiles(git, paths, snapshot, excludesFile, fresh);
  await restoreAgentRepository(git, paths, snapshot, empty);
}
