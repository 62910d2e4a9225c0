import { lstat, mkdir, readFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { linkEntry, managedDirFor, unlinkIfLink, writeFileIfChanged } from '../shared/managed-files.ts';

/**
 * Codex keeps everything in CODEX_HOME: config.toml, auth.json, the thread rollouts
 * (`sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`), sqlite state, logs. sessiond never
 * writes to the user's CODEX_HOME: each run gets a managed one that holds
 * - config.toml: a copy of the user's, refreshed before every run (Codex may write to its own copy);
 *   the retry overrides travel as `-c` flags, so the user's TOML is never parsed or rewritten;
 * - links to the user's auth.json and global instructions (`LINKED_ENTRIES`), so a login carries over;
 * - its own threads, state and logs, which stay sessiond's (a thread travels between hosts as its
 *   rollout file, see session-file.ts).
 */
export const LINKED_ENTRIES = ['auth.json', 'AGENTS.md', 'AGENTS.override.md', 'prompts', 'rules'] as const;

export function userCodexHome(explicit: string | undefined, env: Record<string, string | undefined>): string {
  if (explicit !== undefined) return resolve(explicit);
  const fromEnv = env.CODEX_HOME;
  if (fromEnv !== undefined && fromEnv !== '') return resolve(fromEnv);
  return join(env.HOME ?? homedir(), '.codex');
}

/** Where the managed CODEX_HOME for `userHome` lives (one per user CODEX_HOME, shared by the runs of this host). */
export function managedCodexHomePath(userHome: string, stateDir: string): string {
  return managedDirFor(stateDir, 'codex-home', userHome);
}

export interface ManagedCodexHome {
  path: string;
  /** The user's config.toml, or null when there is none. */
  userConfig: string | null;
}

/** Creates or refreshes the managed CODEX_HOME for `userHome`. Throws with a clear message on I/O errors. */
export async function prepareManagedCodexHome(userHome: string, stateDir: string): Promise<ManagedCodexHome> {
  const managed = managedCodexHomePath(userHome, stateDir);
  await mkdir(managed, { recursive: true, mode: 0o700 });
  const userConfig = await readFile(join(userHome, 'config.toml'), 'utf8').catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return null;
    throw new Error(`cannot read ${join(userHome, 'config.toml')}: ${error.message}`);
  });
  await writeFileIfChanged(join(managed, 'config.toml'), userConfig ?? '');
  for (const entry of LINKED_ENTRIES) {
    const target = join(userHome, entry);
    const present = await lstat(target).then(
      () => true,
      // Absent or unreadable: the entry is not linked.
      () => false,
    );
    if (present) await linkEntry(target, join(managed, entry));
    else await unlinkIfLink(join(managed, entry));
  }
  return { path: managed, userConfig };
}
