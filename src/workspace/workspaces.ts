import { mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { unbundleInto, writeBundle } from './bundle.ts';
import { Git } from './git.ts';
import {
  checkConfig,
  checkSessionId,
  checkSnapshotId,
  isLocalStore,
  sessionPaths,
  type SessionPaths,
} from './layout.ts';
import { commitObject, objectId, treeObject, writeObjects, type GitObject } from './objects.ts';
import { AGENT_GIT, FILES, recordTrees, treeBytes, type AgentGitMemo } from './record.ts';
import { restoreTree } from './restore.ts';
import { createWorkspace } from './source.ts';
import {
  deleteIndex,
  dropGoneIndexes,
  emptyTree,
  ensureStore,
  linkObjects,
  pushIndex,
  readIndex,
  type IndexState,
} from './store.ts';
import {
  WorkspaceInputError,
  WorkspaceQuotaError,
  type Snapshot,
  type WorkspaceConfig,
  type Workspaces,
  type WorkspaceSource,
} from './types.ts';

/** Tree sizes remembered by createWorkspaces (the oldest forgotten first). */
const TREE_SIZES_KEPT = 256;

/** Sessions whose last snapshot createWorkspaces remembers for `settle` (the oldest forgotten first). */
const LAST_TAKEN_KEPT = 1024;

/** Compare-and-swap rounds of a session's index before giving up (each lost round means another writer). */
const INDEX_ROUNDS = 5;

/** Sets `key` in a map holding at most LAST_TAKEN_KEPT entries (the oldest set forgotten first). */
function keep<V>(map: Map<string, V>, key: string, value: V): void {
  map.delete(key);
  if (map.size >= LAST_TAKEN_KEPT) map.delete(map.keys().next().value as string);
  map.set(key, value);
}

const exists = (path: string): Promise<boolean> =>
  stat(path).then(
    () => true,
    // Missing (or unreadable: treated as missing, the next step says why).
    () => false,
  );

function checkLabel(label: unknown): string {
  if (typeof label !== 'string' || label === '' || label.length > 200 || /[\n\r\0]/.test(label)) {
    throw new WorkspaceInputError('label', 'must be one line of 1-200 characters');
  }
  return label;
}

/** Creates the workspaces of one host (see types.ts for the contract, docs/workspaces.md for what is captured). */
export function createWorkspaces(input: WorkspaceConfig): Workspaces {
  const config = checkConfig(input);
  const home = join(config.gitDir, 'home');
  const excludesFile = join(config.gitDir, 'exclude');
  const git = new Git(home);
  let hostReady: Promise<void> | undefined;
  /**
   * Per session, the snapshot this instance last saw its copy hold exactly (a snapshot it took, a
   * prepare of one), forgotten when anything else may have changed the copy (settle).
   */
  const lastTaken = new Map<string, string>();
  const remember = (sessionId: string, id: string): void => keep(lastTaken, sessionId, id);
  /**
   * Per session, its index in the store as this instance last wrote or read it: a snapshot's
   * compare-and-swap starts from it (no read of the store), and a stale one only costs a retry.
   */
  const indexes = new Map<string, IndexState>();
  /** Per session, its agent repository's last recording whose tree a snapshot in the store holds. */
  const agentGitMemos = new Map<string, AgentGitMemo>();

  const host = (): Promise<void> =>
    (hostReady ??= (async () => {
      await mkdir(home, { recursive: true });
      await mkdir(config.root, { recursive: true });
      await writeFile(excludesFile, config.exclude.map((p) => `${p}\n`).join(''));
      await ensureStore(git, config.store);
    })().catch((error: unknown) => {
      hostReady = undefined;
      throw error;
    }));

  /**
   * The bytes of a tree's files, remembered by tree id (a tree's id names its content, whichever
   * session has it): a snapshot whose files did not change since the last one (an attempt's end after
   * its last tool) lists none of them again. At most TREE_SIZES_KEPT are kept.
   */
  const treeSizes = new Map<string, number>();
  async function sizeOf(repo: string, tree: string, empty: string): Promise<number> {
    if (tree === empty) return 0;
    const known = treeSizes.get(tree);
    if (known !== undefined) return known;
    const bytes = await treeBytes(git, repo, tree);
    if (treeSizes.size >= TREE_SIZES_KEPT) treeSizes.delete(treeSizes.keys().next().value as string);
    treeSizes.set(tree, bytes);
    return bytes;
  }

  /** The session's private repository, created when missing; stale locks of a killed call removed. Returns the empty tree. */
  async function open(sessionId: string): Promise<{ paths: SessionPaths; empty: string }> {
    await host();
    const paths = sessionPaths(config, checkSessionId(sessionId));
    const emptyFile = join(paths.dir, 'empty-tree');
    // Absent: a new repository.
    let empty = await readFile(emptyFile, 'utf8').catch(() => null);
    if (empty === null || !(await exists(join(paths.repo, 'HEAD')))) {
      await mkdir(paths.dir, { recursive: true });
      await git.run(['init', '--quiet', '--bare', '--template=', '--', paths.repo]);
      await linkObjects(paths.repo, config.store);
      empty = await emptyTree(paths.repo);
      await writeFile(emptyFile, empty);
    } else await linkObjects(paths.repo, config.store);
    // One session's calls never overlap (the contract): a lock file left here is a killed call's.
    for (const lock of [paths.filesIndex, paths.gitIndex, join(paths.repo, 'refs/store/index')]) {
      await rm(`${lock}.lock`, { force: true });
    }
    return { paths, empty };
  }

  /**
   * The session's index, fetched from the store when this host's view lacks one of `wanted`;
   * rejects (naming `field`) when one is not the session's. Every snapshot of an index was checked
   * when it was made (snapshot, copy) or imported (unbundle).
   */
  async function indexWith(
    paths: SessionPaths,
    sessionId: string,
    wanted: readonly string[],
    field: string,
    known?: IndexState,
  ): Promise<IndexState> {
    let state = known ?? (await readIndex(git, paths.repo, config.store, sessionId, false));
    const absent = (): string | undefined => wanted.find((id) => !state.snapshots.includes(id));
    if (absent() !== undefined) state = await readIndex(git, paths.repo, config.store, sessionId, true);
    const missing = absent();
    if (missing !== undefined) {
      throw new WorkspaceInputError(field, `no snapshot ${missing} of session ${sessionId} in the store`);
    }
    return state;
  }

  /**
   * Writes `objects` and adds `commits` to the session's index in the store: compare-and-swap,
   * retried (with the store's index fetched) when another writer won. `known` from this instance's
   * memory (`indexes`) may be stale: a quota is only refused on a count read from the store.
   */
  async function append(
    paths: SessionPaths,
    sessionId: string,
    objects: readonly GitObject[],
    commits: readonly string[],
    empty: string,
    known: IndexState,
    remembered = false,
  ): Promise<void> {
    let state = known;
    let pending = objects;
    for (let round = 0; round < INDEX_ROUNDS; round++) {
      if (round > 0) state = await readIndex(git, paths.repo, config.store, sessionId, true);
      const added = commits.filter((c) => !state.snapshots.includes(c));
      if (added.length === 0) {
        keep(indexes, sessionId, state);
        return;
      }
      const count = state.snapshots.length + added.length;
      if (config.maxSnapshots > 0 && count > config.maxSnapshots) {
        if (round === 0 && remembered) continue;
        throw new WorkspaceQuotaError('maxSnapshots', config.maxSnapshots, count);
      }
      const snapshots = [...state.snapshots, ...added];
      const index = commitObject(empty, snapshots, Date.now(), `sessiond ${sessionId}`);
      const ids = await writeObjects(paths.repo, [...pending, index], empty);
      pending = [];
      const next = ids[ids.length - 1] ?? '';
      if (await pushIndex(git, paths.repo, config.store, sessionId, state.index, next)) {
        keep(indexes, sessionId, { index: next, snapshots });
        return;
      }
    }
    indexes.delete(sessionId);
    throw new Error(`workspace store: session ${sessionId}'s index kept changing under ${INDEX_ROUNDS} attempts`);
  }

  async function restoreAt(paths: SessionPaths, sessionId: string, id: string, empty: string, field: string) {
    await indexWith(paths, sessionId, [id], field);
    await rm(paths.marker, { force: true });
    await restoreTree(git, paths, id, excludesFile, empty);
    await writeFile(paths.marker, id);
  }

  return {
    path(sessionId) {
      return sessionPaths(config, checkSessionId(sessionId)).workspace;
    },

    async prepare(sessionId, snapshot, source?: WorkspaceSource) {
      lastTaken.delete(sessionId);
      const { paths, empty } = await open(sessionId);
      if (snapshot === null) {
        agentGitMemos.delete(sessionId);
        await rm(paths.marker, { force: true });
        await rm(paths.workspace, { recursive: true, force: true });
        for (const index of [paths.filesIndex, paths.gitIndex]) await rm(index, { force: true });
        try {
          await createWorkspace(git, paths.workspace, source);
        } catch (error) {
          await rm(paths.workspace, { recursive: true, force: true });
          throw error;
        }
        return paths.workspace;
      }
      const id = checkSnapshotId(snapshot, 'snapshot');
      // No marker: not known to be at any.
      const at = await readFile(paths.marker, 'utf8').catch(() => null);
      if (at !== id || !(await exists(paths.workspace))) await restoreAt(paths, sessionId, id, empty, 'snapshot');
      // Handed out: from now on only a snapshot with `settled` or a restore says where the copy is.
      await rm(paths.marker, { force: true });
      remember(sessionId, id);
      return paths.workspace;
    },

    async snapshot(sessionId, label, parent, options) {
      checkLabel(label);
      if (parent !== null) checkSnapshotId(parent, 'parent');
      const { paths, empty } = await open(sessionId);
      if (!(await exists(paths.workspace))) {
        throw new WorkspaceInputError('sessionId', `no workspace of ${sessionId} on this host (prepare it first)`);
      }
      await rm(paths.marker, { force: true });
      lastTaken.delete(sessionId);
      const remembered = indexes.get(sessionId);
      const [trees, known] = await Promise.all([
        recordTrees(git, paths, excludesFile, empty, agentGitMemos.get(sessionId)),
        remembered ?? readIndex(git, paths.repo, config.store, sessionId, false),
      ]);
      if (config.maxBytes > 0) {
        const sizes = await Promise.all([trees.files, trees.agentGit].map((t) => sizeOf(paths.repo, t, empty)));
        const bytes = sizes.reduce((sum, n) => sum + n, 0);
        if (bytes > config.maxBytes) throw new WorkspaceQuotaError('maxBytes', config.maxBytes, bytes);
      }
      const state = parent === null ? known : await indexWith(paths, sessionId, [parent], 'parent', known);
      const root = treeObject([
        [FILES, trees.files],
        [AGENT_GIT, trees.agentGit],
      ]);
      const at = Date.now();
      const commit = commitObject(objectId(root, empty), parent === null ? [] : [parent], at, `${label}\n\nat ${at}`);
      const id = objectId(commit, empty);
      await append(paths, sessionId, [root, commit], [id], empty, state, state === remembered);
      // Its tree is in the store now (compact keeps it): the next snapshot may reuse it.
      if (trees.agentGitListing === null) agentGitMemos.delete(sessionId);
      else keep(agentGitMemos, sessionId, { listing: trees.agentGitListing, tree: trees.agentGit });
      if (options?.settled === true) await writeFile(paths.marker, id);
      remember(sessionId, id);
      return { id, parent, label, at } satisfies Snapshot;
    },

    async settle(sessionId, snapshotId) {
      const id = checkSnapshotId(snapshotId, 'snapshotId');
      if (lastTaken.get(sessionId) !== id) return false;
      const { paths } = await open(sessionId);
      await writeFile(paths.marker, id);
      return true;
    },

    async restore(sessionId, snapshotId) {
      lastTaken.delete(sessionId);
      const id = checkSnapshotId(snapshotId, 'snapshotId');
      const { paths, empty } = await open(sessionId);
      await restoreAt(paths, sessionId, id, empty, 'snapshotId');
    },

    async diff(sessionId, from, to, options) {
      if (from !== null) checkSnapshotId(from, 'from');
      checkSnapshotId(to, 'to');
      const { paths, empty } = await open(sessionId);
      if (from !== null) await indexWith(paths, sessionId, [from], 'from');
      await indexWith(paths, sessionId, [to], 'to');
      const base = from === null ? empty : `${from}:${FILES}`;
      const args = [
        'diff',
        '--no-ext-diff',
        '--no-textconv',
        '--no-color',
        ...(options?.stat === true ? ['--stat'] : []),
      ];
      return git.run([...args, base, `${to}:${FILES}`, '--'], { gitDir: paths.repo });
    },

    async copy(fromSessionId, snapshotId, toSessionId) {
      const id = checkSnapshotId(snapshotId, 'snapshotId');
      checkSessionId(toSessionId, 'toSessionId');
      if (fromSessionId === toSessionId) throw new WorkspaceInputError('toSessionId', 'must differ from fromSessionId');
      const from = await open(checkSessionId(fromSessionId, 'fromSessionId'));
      await indexWith(from.paths, fromSessionId, [id], 'snapshotId');
      const to = await open(toSessionId);
      // Both private repositories are sessiond's own on this host: no store round trip for the objects.
      await git.run(['fetch', '--quiet', '--no-tags', '--no-write-fetch-head', '--', from.paths.repo, id], {
        gitDir: to.paths.repo,
      });
      const known = await readIndex(git, to.paths.repo, config.store, toSessionId, true);
      const tree = (await git.run(['rev-parse', `${id}^{tree}`], { gitDir: to.paths.repo })).trim();
      const at = Date.now();
      const commit = commitObject(tree, [], at, `copy of ${fromSessionId} ${id}\n\nat ${at}`);
      const copied = objectId(commit, to.empty);
      await append(to.paths, toSessionId, [commit], [copied], to.empty, known);
      return copied;
    },

    async remove(sessionId) {
      lastTaken.delete(sessionId);
      indexes.delete(sessionId);
      agentGitMemos.delete(sessionId);
      const { paths } = await open(sessionId);
      await deleteIndex(git, paths.repo, config.store, sessionId);
      await rm(paths.workspace, { recursive: true, force: true });
      await rm(paths.dir, { recursive: true, force: true });
    },

    async bundle(sessionId, snapshotId) {
      const id = checkSnapshotId(snapshotId, 'snapshotId');
      const { paths } = await open(sessionId);
      await indexWith(paths, sessionId, [id], 'snapshotId');
      return writeBundle(git, paths, id);
    },

    async compact(graceMs, exists) {
      if (!Number.isInteger(graceMs) || graceMs < 0) {
        throw new WorkspaceInputError('graceMs', `must be a whole number of ms >= 0 (got ${String(graceMs)})`);
      }
      if (!isLocalStore(config.store)) return false;
      // This host's git home first: a worker's first sweep compacts before any attempt opened a session here.
      await host();
      if (exists !== undefined) await dropGoneIndexes(git, config.store, Date.now() - graceMs, exists);
      await git.run(['gc', '--quiet', `--prune=${Math.ceil(graceMs / 1000)}.seconds.ago`], { gitDir: config.store });
      return true;
    },

    async unbundle(sessionId, bundle) {
      const { paths, empty } = await open(sessionId);
      const { tip, commits } = await unbundleInto(git, paths, bundle, config.maxSnapshots);
      // The files the session goes on from: over this deployment's quota, its next snapshot would fail
      // `quota` anyway; refused here, where the caller can still do something about it.
      if (config.maxBytes > 0) {
        const bytes = await treeBytes(git, paths.repo, `${tip}^{tree}`);
        if (bytes > config.maxBytes) throw new WorkspaceQuotaError('maxBytes', config.maxBytes, bytes);
      }
      const known = await readIndex(git, paths.repo, config.store, sessionId, true);
      await append(paths, sessionId, [], commits, empty, known);
      return tip;
    },
  };
}
