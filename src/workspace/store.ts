import { mkdir, readlink, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Git } from './git.ts';
import { isLocalStore, storeRef } from './layout.ts';
import { writeObjects } from './objects.ts';

/**
 * The snapshot store: one bare repository. Each session has one ref, `refs/sessiond/<hex of its
 * id>`, naming an index commit whose parents are all the session's snapshots (its tree is empty):
 * one ref per session keeps every snapshot reachable (none lost when two holders race), counts them
 * (`maxSnapshots`) and removes them all with one ref deletion. Updates are compare-and-swap,
 * retried on a lost race.
 *
 * A local store (a path) is used in place: each session's private repository has its `objects`
 * directory linked to the store's, so a snapshot's objects are written once, straight into the
 * store, and its index moves with `git update-ref <ref> <new> <old>` (no push, no fetch). A URL
 * store is reached with `git push --force-with-lease` and `git fetch` (only new objects move).
 */

/** Where a session's index is kept in sessiond's private repository (so fetches negotiate from it). */
const LOCAL_INDEX_REF = 'refs/store/index';

const storeReady = new Map<string, Promise<void>>();

const exists = (path: string): Promise<boolean> =>
  stat(path).then(
    () => true,
    // Missing.
    () => false,
  );

/** Creates a local store (a bare repository) when it does not exist. Idempotent. */
export function ensureStore(git: Git, store: string): Promise<void> {
  if (!isLocalStore(store)) return Promise.resolve();
  let ready = storeReady.get(store);
  if (ready === undefined) {
    ready = (async () => {
      const exists = await stat(store).then(
        () => true,
        // Missing: created below.
        () => false,
      );
      if (exists) return;
      await mkdir(dirname(store), { recursive: true });
      await git.run(['init', '--quiet', '--bare', '--template=', '--', store]);
    })();
    // A failed creation is retried by the next call.
    ready.catch(() => storeReady.delete(store));
    storeReady.set(store, ready);
  }
  return ready;
}

/**
 * Links a session's private repository to a local store's objects (nothing to do for a URL store,
 * or when it is linked already). Objects of its own are dropped: every snapshot a store lists was
 * written into or sent to the store before it was listed.
 */
export async function linkObjects(repo: string, store: string): Promise<void> {
  if (!isLocalStore(store)) return;
  const target = join(store, 'objects');
  // Not a link (yet).
  const current = await readlink(join(repo, 'objects')).catch(() => null);
  if (current === target) return;
  await rm(join(repo, 'objects'), { recursive: true, force: true });
  await symlink(target, join(repo, 'objects'));
}

/** A session's index: the commit listing its snapshots (null: none yet), and the list, oldest first. */
export interface IndexState {
  readonly index: string | null;
  readonly snapshots: readonly string[];
}

/**
 * The session's index: a local store's current one; for a URL store the one this host last saw,
 * or with `fetch`, the store's (fetched with every snapshot it lists: only new objects move).
 */
export async function readIndex(
  git: Git,
  repo: string,
  store: string,
  sessionId: string,
  fetch: boolean,
): Promise<IndexState> {
  const local = isLocalStore(store);
  if (fetch && !local) {
    const result = await git.try(
      [
        'fetch',
        '--quiet',
        '--no-tags',
        '--no-write-fetch-head',
        '--',
        store,
        `+${storeRef(sessionId)}:${LOCAL_INDEX_REF}`,
      ],
      { gitDir: repo },
    );
    if (result.exitCode !== 0) {
      if (!/couldn't find remote ref/i.test(result.stderr)) {
        const reason = result.stderr.trim();
        throw new Error(`workspace store ${store}: fetching session ${sessionId}'s snapshots failed: ${reason}`);
      }
      await rm(join(repo, LOCAL_INDEX_REF), { force: true });
    }
  }
  // This host never saw an index of the session (a cold host): nothing to read.
  if (!local && !(await exists(join(repo, LOCAL_INDEX_REF)))) return { index: null, snapshots: [] };
  // One process for the ref and its commit: `<oid> commit <size>\n<body>`, or `<name> missing`.
  const out = await git.run(['cat-file', '--batch'], {
    gitDir: local ? store : repo,
    input: `${local ? storeRef(sessionId) : LOCAL_INDEX_REF}\n`,
  });
  const newline = out.indexOf('\n');
  const [index, type] = out.slice(0, newline).split(' ');
  if (type !== 'commit' || index === undefined) return { index: null, snapshots: [] };
  const body = out.slice(newline + 1);
  const header = body.slice(0, body.indexOf('\n\n'));
  const snapshots = header
    .split('\n')
    .filter((line) => line.startsWith('parent '))
    .map((line) => line.slice('parent '.length));
  return { index, snapshots };
}

/** Records `index` as the one this host last saw (write and rename: a crash leaves the old or the new). */
async function setLocalIndex(repo: string, index: string): Promise<void> {
  const file = join(repo, LOCAL_INDEX_REF);
  await mkdir(dirname(file), { recursive: true });
  await writeFile(`${file}.new`, `${index}\n`);
  await rename(`${file}.new`, file);
}

/** The empty tree's id in a sha1 repository (sessiond's are: `git init`, no object format set). */
const SHA1_EMPTY_TREE = '4b825dc642cb6eb9a060e54bf8d69288fbee4904';

/** Writes the empty tree into `repo` (snapshots of a workspace with no repository of its own use it). */
export async function emptyTree(repo: string): Promise<string> {
  const [id] = await writeObjects(repo, [{ type: 'tree', body: Buffer.alloc(0) }], SHA1_EMPTY_TREE);
  return id ?? SHA1_EMPTY_TREE;
}

/**
 * Sets the session's index in the store to `next` if it still is `expected` (null: absent).
 * Resolves false when another writer moved it first.
 */
export async function pushIndex(
  git: Git,
  repo: string,
  store: string,
  sessionId: string,
  expected: string | null,
  next: string,
): Promise<boolean> {
  const ref = storeRef(sessionId);
  if (isLocalStore(store)) {
    const old = expected ?? '0'.repeat(next.length);
    const moved = await git.try(['update-ref', ref, next, old], { gitDir: store });
    if (moved.exitCode === 0) return true;
    if (/but expected|already exists|unable to resolve reference|cannot lock ref/i.test(moved.stderr)) return false;
    throw new Error(
      `workspace store ${store}: recording session ${sessionId}'s snapshot failed: ${moved.stderr.trim()}`,
    );
  }
  const result = await git.try(
    ['push', '--quiet', '--porcelain', `--force-with-lease=${ref}:${expected ?? ''}`, '--', store, `+${next}:${ref}`],
    // No delta search: the new trees go whole. Finding their deltas (and the store resolving them) was
    // half a push's time at 10,000 files; the bytes sent grow by at most the changed directories' listings.
    { gitDir: repo, config: ['pack.window=0'] },
  );
  if (result.exitCode !== 0) {
    if (/stale info|fetch first|rejected/i.test(result.stdout + result.stderr)) return false;
    throw new Error(
      `workspace store ${store}: pushing session ${sessionId}'s snapshot failed: ${result.stderr.trim()}`,
    );
  }
  await setLocalIndex(repo, next);
  return true;
}

/** Deletes the session's index from the store (its snapshots become unreachable there). */
export async function deleteIndex(git: Git, repo: string, store: string, sessionId: string): Promise<void> {
  const ref = storeRef(sessionId);
  if (isLocalStore(store)) {
    await git.run(['update-ref', '-d', ref], { gitDir: store });
    return;
  }
  const result = await git.try(['push', '--quiet', '--porcelain', '--', store, `:${ref}`], { gitDir: repo });
  // Deleting a ref that is not there: git warns and exits 0 or 1 depending on the transport.
  if (result.exitCode !== 0 && !/unable to delete|remote ref does not exist/i.test(result.stdout + result.stderr)) {
    throw new Error(
      `workspace store ${store}: deleting session ${sessionId}'s snapshots failed: ${result.stderr.trim()}`,
    );
  }
}

/** Session indexes looked at per `dropGoneIndexes`, at most (the rest at the next compaction). */
const INDEXES_PER_DROP = 10_000;

/**
 * Deletes from a local store the index of each session `exists` says is gone, when the index did not
 * move since `before` (epoch ms; its commit's time): a removal that raced another host's snapshot
 * can leave one behind, and its snapshots would stay reachable for ever. An index that moves between
 * the listing and the deletion is kept (compare-and-swap).
 */
export async function dropGoneIndexes(
  git: Git,
  store: string,
  before: number,
  exists: (sessionIds: readonly string[]) => Promise<readonly boolean[]>,
): Promise<number> {
  const out = await git.run(
    [
      'for-each-ref',
      `--count=${INDEXES_PER_DROP}`,
      '--format=%(objectname) %(committerdate:unix) %(refname)',
      'refs/sessiond/',
    ],
    { gitDir: store },
  );
  const stale = out
    .split('\n')
    .map((line) => line.split(' '))
    .filter((parts): parts is [string, string, string] => parts.length === 3 && Number(parts[1]) * 1000 < before)
    .map(([id, , ref]) => ({
      id,
      ref,
      sessionId: Buffer.from(ref.slice('refs/sessiond/'.length), 'hex').toString('utf8'),
    }));
  if (stale.length === 0) return 0;
  const present = await exists(stale.map((s) => s.sessionId));
  let dropped = 0;
  for (const [i, index] of stale.entries()) {
    if (present[i] !== false) continue;
    // Moved since listed (a snapshot after all): kept.
    const result = await git.try(['update-ref', '-d', index.ref, index.id], { gitDir: store });
    if (result.exitCode === 0) dropped += 1;
  }
  return dropped;
}
