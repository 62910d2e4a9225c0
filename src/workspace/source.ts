import { mkdir } from 'node:fs/promises';
import type { Git } from './git.ts';
import { tail } from './git.ts';
import { WorkspaceInputError, type WorkspaceSource } from './types.ts';

/**
 * A new workspace: an empty repository, or a clone of the caller's source repository. The clone is
 * the session's own repository (never `--shared` or `--reference`: alternates would point outside
 * the sandbox and to this host's paths, so the copy would break inside the sandbox and on another
 * host); `--no-local` so a local source's object files are copied through git, never hardlinked
 * (an agent could otherwise rewrite the source's objects). The clone's config is the one git just
 * wrote; the source's config, hooks and attributes-driven filters are never used. No template: the
 * new `.git` holds no sample hooks (they would only count against `maxBytes`).
 */
export async function createWorkspace(git: Git, workspace: string, source?: WorkspaceSource): Promise<void> {
  if (source === undefined) {
    await mkdir(workspace, { recursive: true });
    await git.run(['init', '--quiet', '--template=', '--', workspace]);
    return;
  }
  const repo: unknown = source.repo;
  if (typeof repo !== 'string' || repo === '' || repo.startsWith('-') || /[\n\0]/.test(repo)) {
    throw new WorkspaceInputError('source.repo', `must be a repository URL or path (got ${JSON.stringify(repo)})`);
  }
  const ref: unknown = source.ref;
  if (
    ref !== undefined &&
    (typeof ref !== 'string' || ref === '' || ref.startsWith('-') || /[\s\0~^:?*[\\]/.test(ref))
  ) {
    throw new WorkspaceInputError('source.ref', `must be a branch, tag or commit (got ${JSON.stringify(ref)})`);
  }
  const cloned = await git.try(
    [
      'clone',
      '--quiet',
      '--no-local',
      '--no-recurse-submodules',
      ...(ref === undefined ? [] : ['--no-checkout']),
    ].concat(['--', repo, workspace]),
    // A hostile source's malformed objects (paths like `.git` or `..`) are refused while fetching.
    { config: ['transfer.fsckObjects=true'] },
  );
  if (cloned.exitCode !== 0) {
    throw new WorkspaceInputError(
      'source.repo',
      `cannot clone ${JSON.stringify(repo)}: not a git repository, not reachable, or not valid: ${tail(cloned.stderr)}`,
    );
  }
  if (ref === undefined) return;
  const inClone = { cwd: workspace, gitDir: `${workspace}/.git`, workTree: workspace };
  let target: string | null = null;
  for (const candidate of [ref, `origin/${ref}`]) {
    const found = await git.try(
      ['rev-parse', '--verify', '--quiet', '--end-of-options', `${candidate}^{commit}`],
      inClone,
    );
    if (found.exitCode === 0) {
      target = candidate;
      break;
    }
  }
  if (target === null) {
    throw new WorkspaceInputError('source.ref', `no branch, tag or commit ${JSON.stringify(ref)} in ${repo}`);
  }
  // A remote branch's name checks out a local branch tracking it; a tag or commit, a detached HEAD.
  await git.run(['checkout', '--quiet', ref, '--'], inClone);
}
