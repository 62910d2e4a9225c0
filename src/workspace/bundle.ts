import { randomUUID } from 'node:crypto';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { tail, type Git } from './git.ts';
import type { SessionPaths } from './layout.ts';
import { isSnapshotCommit } from './record.ts';
import { WorkspaceInputError, WorkspaceQuotaError } from './types.ts';

/** The one ref a snapshot bundle carries. */
const BUNDLE_REF = 'refs/sessiond/snapshot';
const MAX_BUNDLE_HEADER = 64 * 1024;

/**
 * The snapshot and its ancestors (so the ids of earlier snapshots stay valid after an import), as a git bundle.
 * The bundle's one ref is set in a throwaway repository of this export's own that borrows the private
 * repository's objects (alternates): two exports of one session at once, from one process or two, never
 * move or delete each other's ref, and the private repository's refs are not touched.
 */
export async function writeBundle(git: Git, paths: SessionPaths, id: string): Promise<Buffer> {
  const scratch = join(paths.dir, `out-${randomUUID()}.git`);
  const file = `${scratch}.bundle`;
  try {
    await mkdir(join(scratch, 'objects', 'info'), { recursive: true });
    await mkdir(join(scratch, 'refs'), { recursive: true });
    await writeFile(join(scratch, 'HEAD'), 'ref: refs/heads/main\n');
    await writeFile(join(scratch, 'objects', 'info', 'alternates'), `${resolve(paths.repo, 'objects')}\n`);
    await git.run(['update-ref', BUNDLE_REF, id], { gitDir: scratch });
    await git.run(['bundle', 'create', '-q', file, BUNDLE_REF], { gitDir: scratch });
    return await readFile(file);
  } finally {
    await rm(file, { force: true });
    await rm(scratch, { recursive: true, force: true });
  }
}

/** Parses a bundle's header: its refs and prerequisites; null when it is not a v2/v3 git bundle. */
function parseHeader(bundle: Buffer): { refs: [string, string][]; prerequisites: number } | null {
  const head = bundle.subarray(0, MAX_BUNDLE_HEADER).toString('latin1');
  const end = head.indexOf('\n\n');
  if (end < 0) return null;
  const lines = head.slice(0, end).split('\n');
  if (lines[0] !== '# v2 git bundle' && lines[0] !== '# v3 git bundle') return null;
  const refs: [string, string][] = [];
  let prerequisites = 0;
  for (const line of lines.slice(1)) {
    if (line.startsWith('@')) continue; // v3 capabilities
    if (line.startsWith('-')) prerequisites++;
    else {
      const match = /^([0-9a-f]{40}|[0-9a-f]{64}) (\S+)$/.exec(line);
      if (match === null) return null;
      refs.push([match[1] ?? '', match[2] ?? '']);
    }
  }
  return { refs, prerequisites };
}

/**
 * Checks a bundle (a complete history, one ref `refs/sessiond/snapshot`, git's own verification, every
 * commit a snapshot) and fetches it into the private repository, objects checked by fsck.
 * Returns the snapshot and every snapshot it holds, oldest first.
 */
export async function unbundleInto(
  git: Git,
  paths: SessionPaths,
  bundle: Buffer,
  maxSnapshots: number,
): Promise<{ tip: string; commits: string[] }> {
  if (!Buffer.isBuffer(bundle)) throw new WorkspaceInputError('bundle', 'must be a Buffer');
  const header = parseHeader(bundle);
  if (header === null) throw new WorkspaceInputError('bundle', 'not a git bundle');
  const [first] = header.refs;
  if (header.refs.length !== 1 || first === undefined || first[1] !== BUNDLE_REF || header.prerequisites !== 0) {
    throw new WorkspaceInputError(
      'bundle',
      `not a workspace snapshot bundle (one ref ${BUNDLE_REF}, complete history)`,
    );
  }
  const tip = first[0];
  const file = join(paths.dir, `in-${randomUUID()}.bundle`);
  try {
    await writeFile(file, bundle);
    const verified = await git.try(['bundle', 'verify', '-q', file], { gitDir: paths.repo });
    if (verified.exitCode !== 0)
      throw new WorkspaceInputError('bundle', `corrupt or incomplete: ${tail(verified.stderr)}`);
    const fetched = await git.try(
      ['fetch', '--quiet', '--no-tags', '--no-write-fetch-head', '--', file, `+${BUNDLE_REF}:refs/imported/snapshot`],
      { gitDir: paths.repo, config: ['transfer.fsckObjects=true'] },
    );
    if (fetched.exitCode !== 0) throw new WorkspaceInputError('bundle', `refused: ${tail(fetched.stderr)}`);
  } finally {
    await rm(file, { force: true });
  }
  const commits = (await git.run(['rev-list', '--reverse', '--topo-order', tip], { gitDir: paths.repo }))
    .split('\n')
    .filter((line) => line !== '');
  await git.run(['update-ref', '-d', 'refs/imported/snapshot'], { gitDir: paths.repo });
  if (maxSnapshots > 0 && commits.length > maxSnapshots) {
    throw new WorkspaceQuotaError('maxSnapshots', maxSnapshots, commits.length);
  }
  for (const commit of commits) {
    if (!(await isSnapshotCommit(git, paths.repo, commit))) {
      throw new WorkspaceInputError('bundle', `commit ${commit} is not a workspace snapshot`);
    }
  }
  return { tip, commits };
}
