import { createHash } from 'node:crypto';
import type { Git } from './git.ts';

/**
 * Git objects sessiond writes itself (a snapshot's root tree, its commit, a session's index commit):
 * their bodies and ids are computed here, so the three are written at once, without `mktree` or
 * `commit-tree` (which would read more than sessiond's own settings).
 */
export interface GitObject {
  readonly type: 'tree' | 'commit';
  readonly body: Buffer;
}

/** The object format of a repository whose empty tree is `empty` (sha1: 40 hex digits, sha256: 64). */
function algorithm(empty: string): 'sha1' | 'sha256' {
  return empty.length === 64 ? 'sha256' : 'sha1';
}

export function objectId(object: GitObject, empty: string): string {
  return createHash(algorithm(empty))
    .update(`${object.type} ${object.body.length}\0`)
    .update(object.body)
    .digest('hex');
}

/** A tree of subtrees (names sorted as git sorts directories). */
export function treeObject(entries: readonly (readonly [string, string])[]): GitObject {
  const sorted = [...entries].sort(([a], [b]) => (`${a}/` < `${b}/` ? -1 : 1));
  const parts = sorted.flatMap(([name, oid]) => [Buffer.from(`40000 ${name}\0`), Buffer.from(oid, 'hex')]);
  return { type: 'tree', body: Buffer.concat(parts) };
}

export function commitObject(tree: string, parents: readonly string[], atMs: number, message: string): GitObject {
  const when = `${Math.floor(atMs / 1000)} +0000`;
  const text = [
    `tree ${tree}`,
    ...parents.map((p) => `parent ${p}`),
    `author sessiond <sessiond@localhost> ${when}`,
    `committer sessiond <sessiond@localhost> ${when}`,
    '',
    `${message}\n`,
  ].join('\n');
  return { type: 'commit', body: Buffer.from(text) };
}

/** Writes objects into `repo` (concurrently), checking that git computed the ids sessiond did. */
export async function writeObjects(
  git: Git,
  repo: string,
  objects: readonly GitObject[],
  empty: string,
): Promise<string[]> {
  const ids = objects.map((object) => objectId(object, empty));
  const written = await Promise.all(
    objects.map((object) =>
      git.run(['hash-object', '-t', object.type, '-w', '--stdin'], { gitDir: repo, input: object.body }),
    ),
  );
  written.forEach((out, i) => {
    if (out.trim() !== ids[i]) throw new Error(`git wrote ${out.trim()} where sessiond computed ${ids[i] ?? '?'}`);
  });
  return ids;
}
