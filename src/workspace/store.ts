import { mkdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Git } from './git.ts';
import { isLocalStore, storeRef } from './layout.ts';

/**
 * The snapshot store: one bare repository. Each session has one ref, `refs/sessiond/<hex of its
 * id>`, naming an index commit whose parents are all the session's snapshots (its tree is empty):
 * one ref per session keeps every snapshot reachable (none lost when two holders race), counts them
 * (`maxSnapshots`) and removes them all with one ref deletion. Updates are compare-and-swap
 * (`--force-with-lease`), retried on a lost race.
 */

/** Where a session's index is kept in sessiond's private repository (so fetches negotiate from it). */
export const LOCAL_INDEX_REF = 'refs/store/index';

let storeReady: Map<string, Promise<void>> = new Map();

/** Creates a local store (a bare repository) when it does not exist. Idempotent. */
export function ensureStore(git: Git, store: string): Promise<void> {
  if (!isLocalStore(store)) return Promise.resolve();
  let ready = storeReady.get(store);
  if (ready === undefined) {
    ready = (async () => {
      const exists = await stat(store).then(
        () => true,
        () => false, // missing: created below
      );
      if (exists) return;
      await mkdir(dirname(store), { recursive: true });
      await git.run(['init', '--quiet', '--bare', '--template=', '--', store]);
    })();
    ready.catch(() => storeReady.delete(store)); // a failed creation is retried by the next call
    storeReady.set(store, ready);
  }
  return ready;
}

/** For tests that delete a local store between cases. */
export function forgetStores(): void {
  storeReady = new Map();
}

/** Fetches the session's index (and every snapshot it holds) into `repo`; null when the store has none. */
export async function fetchIndex(git: Git, repo: string, store: string, sessionId: string): Promise<string | null> {
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
    if (/couldn't find remote ref/i.test(result.stderr)) {
      await git.run(['update-ref', '-d', LOCAL_INDEX_REF], { gitDir: repo });
      return null;
    }
    throw new Error(
      `workspace store ${store}: fetching session ${sessionId}'s snapshots failed: ${result.stderr.trim()}`,
    );
  }
  return localIndex(git, repo);
}

/** The index this host last saw, or null (the ref file read directly: sessiond never packs this repository's refs). */
export async function localIndex(_git: Git, repo: string): Promise<string | null> {
  const text = await readFile(join(repo, LOCAL_INDEX_REF), 'utf8').catch(() => null); // absent: none seen
  const oid = text?.trim() ?? '';
  return /^[0-9a-f]{40,64}$/.test(oid) ? oid : null;
}

/** Records `index` as the one this host last saw (write and rename: a crash leaves the old or the new). */
async function setLocalIndex(repo: string, index: string): Promise<void> {
  const file = join(repo, LOCAL_INDEX_REF);
  await mkdir(dirname(file), { recursive: true });
  await writeFile(`${file}.new`, `${index}\n`);
  await rename(`${file}.new`, file);
}

/** The snapshots an index lists, oldest first. */
export async function indexSnapshots(git: Git, repo: string, index: string | null): Promise<string[]> {
  if (index === null) return [];
  const text = await git.run(['cat-file', 'commit', index], { gitDir: repo });
  const header = text.slice(0, text.indexOf('\n\n'));
  return header
    .split('\n')
    .filter((line) => line.startsWith('parent '))
    .map((line) => line.slice('parent '.length));
}

/** Writes a commit object (no hooks, no config: `hash-object`), returning its id. */
export async function writeCommit(
  git: Git,
  repo: string,
  tree: string,
  parents: readonly string[],
  atMs: number,
  message: string,
): Promise<string> {
  const when = `${Math.floor(atMs / 1000)} +0000`;
  const body = [
    `tree ${tree}`,
    ...parents.map((p) => `parent ${p}`),
    `author sessiond <sessiond@localhost> ${when}`,
    `committer sessiond <sessiond@localhost> ${when}`,
    '',
    message,
  ].join('\n');
  return (await git.run(['hash-object', '-t', 'commit', '-w', '--stdin'], { gitDir: repo, input: `${body}\n` })).trim();
}

/** Writes the empty tree into `repo` (snapshots of a workspace with no repository of its own use it). */
export async function emptyTree(git: Git, repo: string): Promise<string> {
  return (await git.run(['hash-object', '-t', 'tree', '-w', '--stdin'], { gitDir: repo, input: '' })).trim();
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
  const result = await git.try(
    ['push', '--quiet', '--porcelain', `--force-with-lease=${ref}:${expected ?? ''}`, '--', store, `+${next}:${ref}`],
    { gitDir: repo },
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
  const result = await git.try(['push', '--quiet', '--porcelain', '--', store, `:${ref}`], { gitDir: repo });
  // Deleting a ref that is not there: git warns and exits 0 or 1 depending on the transport.
  if (result.exitCode !== 0 && !/unable to delete|remote ref does not exist/i.test(result.stdout + result.stderr)) {
    throw new Error(
      `workspace store ${store}: deleting session ${sessionId}'s snapshots failed: ${result.stderr.trim()}`,
    );
  }
}
