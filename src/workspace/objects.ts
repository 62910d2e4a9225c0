import { createHash, randomBytes } from 'node:crypto';
import { link, mkdir, stat, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { deflate } from 'node:zlib';

/**
 * Git objects sessiond writes itself (a snapshot's root tree, its commit, a session's index commit):
 * their bodies and ids are computed here and they are written here as loose objects, without a git
 * process (`mktree` or `commit-tree` would read more than sessiond's own settings; `hash-object`
 * cost a process per object, most of a snapshot's time after `git add`).
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

const deflateAsync = promisify(deflate);

/** Writes of one object retried after its directory vanished (a concurrent `git gc` of the store). */
const WRITE_ROUNDS = 5;

/** The object's loose form: its header and body, zlib-deflated (what git writes under objects/). */
async function looseBytes(object: GitObject): Promise<Buffer> {
  return deflateAsync(Buffer.concat([Buffer.from(`${object.type} ${object.body.length}\0`), object.body]));
}

/**
 * Writes objects into `repo`'s object store as loose objects (`objects/ab/cdef…`), as git does: into
 * a temporary file of the same directory, then linked to its name, so a reader sees a whole object
 * or none; an object already there is left as it is. Returns their ids.
 */
export async function writeObjects(repo: string, objects: readonly GitObject[], empty: string): Promise<string[]> {
  return Promise.all(
    objects.map(async (object) => {
      const id = objectId(object, empty);
      const dir = join(repo, 'objects', id.slice(0, 2));
      const path = join(dir, id.slice(2));
      const present = await stat(path).then(
        () => true,
        // Absent (ENOENT): written below.
        () => false,
      );
      if (present) return id;
      const bytes = await looseBytes(object);
      for (let round = 0; ; round++) {
        await mkdir(dir, { recursive: true });
        const temp = join(dir, `tmp_obj_sessiond_${randomBytes(6).toString('hex')}`);
        try {
          await writeFile(temp, bytes, { mode: 0o444 });
        } catch (error) {
          // A store's `git gc` (compact) removes fan-out directories it emptied: made again, as git's own writes do.
          if ((error as NodeJS.ErrnoException).code === 'ENOENT' && round < WRITE_ROUNDS) continue;
          throw error;
        }
        try {
          await link(temp, path);
        } catch (error) {
          // Another writer linked the same object first: it is the same bytes.
          if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
        } finally {
          await unlink(temp);
        }
        return id;
      }
    }),
  );
}
