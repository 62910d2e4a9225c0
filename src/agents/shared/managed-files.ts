import { randomUUID } from 'node:crypto';
import { lstat, readFile, readlink, rename, symlink, unlink, writeFile } from 'node:fs/promises';

/**
 * The file operations behind an agent's managed home (pi's agent dir, CODEX_HOME, Gemini's home):
 * each safe to run from concurrent attempts of the same host.
 */

/** Writes `text` to `path` (mode 0600) unless it already holds exactly that; atomic (temp file + rename). */
export async function writeFileIfChanged(path: string, text: string): Promise<void> {
  if ((await readFile(path, 'utf8').catch(() => null)) === text) return;
  const temp = `${path}.${process.pid}.${randomUUID()}.tmp`;
  await writeFile(temp, text, { mode: 0o600 });
  await rename(temp, path);
}

/** Makes `path` a symlink to `target` (replacing whatever was there), unless it already is one. */
export async function linkEntry(target: string, path: string): Promise<void> {
  const existing = await lstat(path).catch(() => null);
  if (existing?.isSymbolicLink() && (await readlink(path)) === target) return;
  if (existing !== null) await unlink(path).catch(() => undefined);
  await symlink(target, path).catch((error: NodeJS.ErrnoException) => {
    // Another attempt linked it at the same moment: same target, nothing to do.
    if (error.code !== 'EEXIST') throw error;
  });
}

/** Removes `path` if it is a symlink (a link to a user file that is gone); leaves anything else. */
export async function unlinkIfLink(path: string): Promise<void> {
  const existing = await lstat(path).catch(() => null);
  if (existing?.isSymbolicLink()) await unlink(path).catch(() => undefined);
}
