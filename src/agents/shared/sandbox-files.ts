import { lstat, mkdir, readdir, realpath } from 'node:fs/promises';
import { join } from 'node:path';
import type { SandboxFiles } from '../../process/index.ts';

/**
 * What an agent's sandbox shows of its managed home (a dir of sessiond's state dir whose top-level
 * symlinks lead to the user's files): the home itself (read-only, or read-write for an agent that
 * keeps its own state there), and the targets of its links read-only, but those named in `skip`.
 * Contract: never throws; what cannot be read is left out (the agent then does without it).
 */
export async function managedHomeFiles(
  home: string,
  options: { writable: boolean; skip?: readonly string[] },
): Promise<SandboxFiles> {
  const readOnly: string[] = [];
  // Contract above: a home that cannot be read (or is not made yet) shows nothing.
  const entries = await readdir(home).catch(() => [] as string[]);
  for (const entry of entries) {
    if (options.skip?.includes(entry) === true) continue;
    const path = join(home, entry);
    const isLink = await lstat(path).then(
      (s) => s.isSymbolicLink(),
      // Gone since readdir: nothing to show.
      () => false,
    );
    if (!isLink) continue;
    // A dangling link (its target removed by the user): nothing to bind.
    const target = await realpath(path).catch(() => null);
    if (target !== null) readOnly.push(target);
  }
  return options.writable ? { readOnly, writable: [home] } : { readOnly: [home, ...readOnly] };
}

/** Makes `dir` (an agent's session dir) if missing; returns its real path (links resolved), or null when it cannot be made. */
export async function ensureDir(dir: string): Promise<string | null> {
  try {
    await mkdir(dir, { recursive: true });
    return await realpath(dir);
  } catch {
    // Documented above: null, and the caller then gives the sandbox no writable session dir.
    return null;
  }
}
