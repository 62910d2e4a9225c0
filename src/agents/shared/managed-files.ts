import { createHash, randomUUID } from 'node:crypto';
import { lstat, readFile, readlink, rename, symlink, unlink, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';

/**
 * The file operations behind an agent's managed home (pi's agent dir, CODEX_HOME, Gemini's home):
 * each safe to run from concurrent attempts of the same host.
 */

/** sessiond's own state dir on this host: $SESSIOND_STATE_DIR, else $XDG_STATE_HOME/sessiond, else ~/.local/state/sessiond. */
export function sessiondStateDir(env: Record<string, string | undefined>): string {
  const explicit = env.SESSIOND_STATE_DIR;
  if (explicit !== undefined && explicit !== '') return resolve(explicit);
  const xdg = env.XDG_STATE_HOME;
  return join(xdg !== undefined && xdg !== '' ? xdg : join(env.HOME ?? homedir(), '.local', 'state'), 'sessiond');
}

/** Where the managed home of `kind` for the user's `userDir` lives: one per user dir, shared by the runs of this host. */
export function managedDirFor(stateDir: string, kind: string, userDir: string): string {
  return join(stateDir, kind, createHash('sha256').update(userDir).digest('hex').slice(0, 16));
}

/** Writes `text` to `path` (mode 0600) atomically: a temp file of its own (unique, even between concurrent attempts of one process), then a rename. */
export async function writeFileAtomic(path: string, text: string): Promise<void> {
  const temp = `${path}.${process.pid}.${randomUUID()}.tmp`;
  await writeFile(temp, text, { mode: 0o600 });
  await rename(temp, path);
}

/** Writes `text` to `path` (mode 0600) unless it already holds exactly that; atomic (see writeFileAtomic). */
export async function writeFileIfChanged(path: string, text: string): Promise<void> {
  // No file yet: it is written.
  if ((await readFile(path, 'utf8').catch(() => null)) === text) return;
  await writeFileAtomic(path, text);
}

/** Makes `path` a symlink to `target` (replacing whatever was there), unless it already is one. */
export async function linkEntry(target: string, path: string): Promise<void> {
  // Nothing there yet: the link is made.
  const existing = await lstat(path).catch(() => null);
  if (existing?.isSymbolicLink() && (await readlink(path)) === target) return;
  // Gone meanwhile is as good as removed; anything else fails the symlink below, which says so.
  if (existing !== null) await unlink(path).catch(() => undefined);
  await symlink(target, path).catch((error: NodeJS.ErrnoException) => {
    // Another attempt linked it at the same moment: same target, nothing to do.
    if (error.code !== 'EEXIST') throw error;
  });
}

/** Removes `path` if it is a symlink (a link to a user file that is gone); leaves anything else. */
export async function unlinkIfLink(path: string): Promise<void> {
  // Nothing there: nothing to remove.
  const existing = await lstat(path).catch(() => null);
  // Gone meanwhile is as good as removed.
  if (existing?.isSymbolicLink()) await unlink(path).catch(() => undefined);
}
