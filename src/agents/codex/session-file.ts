import { mkdir, readdir, readFile } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { writeFileAtomic } from '../shared/managed-files.ts';
import { shown, stateObject, stringField } from '../shared/state-check.ts';

/**
 * Codex keeps a thread in one append-only rollout file,
 * `<CODEX_HOME>/sessions/YYYY/MM/DD/rollout-<local time>-<thread id>.jsonl`. `codex exec resume <id>`
 * needs nothing else: measured with 0.171, a fresh CODEX_HOME holding only that file (in any date
 * folder) resumes the thread with its whole history, from another cwd too. So the file travels with
 * the session (the runtime stores it after each attempt and puts it back before the next one).
 */
export interface CodexRolloutState {
  version: 1;
  /** Path under `sessions/`, e.g. `2026/11/29/rollout-2026-11-29T21-54-02-<id>.jsonl`. */
  path: string;
  content: string;
}

const ROLLOUT_PATH =
  /^\d{4}\/\d{2}\/\d{2}\/rollout-[\w.:-]+-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$/i;

/** The rollout path (relative to `sessions/`) of `threadId`, or null. */
async function findRollout(sessionsDir: string, threadId: string): Promise<string | null> {
  let names: string[];
  try {
    names = await readdir(sessionsDir, { recursive: true });
  } catch {
    // No sessions folder: the session was never written on this host.
    return null;
  }
  const wanted = threadId.toLowerCase();
  for (const name of names) {
    const path = name.split(sep).join('/');
    if (ROLLOUT_PATH.exec(path)?.[1]?.toLowerCase() === wanted) return path;
  }
  return null;
}

export async function exportCodexRollout(codexHome: string, threadId: string): Promise<CodexRolloutState | null> {
  const sessionsDir = join(codexHome, 'sessions');
  const path = await findRollout(sessionsDir, threadId);
  if (path === null) return null;
  return { version: 1, path, content: await readFile(join(sessionsDir, path), 'utf8') };
}

const THREAD_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A state as an archive brings it: `threadId` is a Codex thread id (a UUID), the path its own rollout under `sessions/`. Throws naming the field. */
export function checkCodexState(raw: string, threadId: string): CodexRolloutState {
  if (!THREAD_ID.test(threadId)) throw new Error(`field: ${shown(threadId)} is not a Codex thread id (a UUID)`);
  const state = stateObject(raw, ['version', 'path', 'content']);
  if (state.version !== 1) throw new Error('value.version: must be 1');
  const path = stringField(state, 'path');
  const id = ROLLOUT_PATH.exec(path)?.[1];
  if (id === undefined)
    throw new Error(
      `value.path: ${shown(path)} is not a rollout path Codex writes (YYYY/MM/DD/rollout-<time>-<thread id>.jsonl)`,
    );
  if (id.toLowerCase() !== threadId.toLowerCase())
    throw new Error(`value.path: ${shown(path)} is the rollout of thread ${id}, not of ${threadId}`);
  return { version: 1, path, content: stringField(state, 'content') };
}

/**
 * Puts a thread's rollout back under `<codexHome>/sessions`, unless the local copy already is the same
 * or further along (a same-host run) and not `exact`. A local copy in another date folder is replaced
 * in place, so Codex never sees two files for one thread. `exact`: the stored state replaces a local
 * copy that is further along (a workspace session going back to its recorded point).
 */
export async function importCodexRollout(
  codexHome: string,
  threadId: string,
  state: CodexRolloutState,
  exact = false,
): Promise<void> {
  const id = ROLLOUT_PATH.exec(state.path)?.[1];
  if (state.version !== 1 || id === undefined || id.toLowerCase() !== threadId.toLowerCase()) {
    throw new Error(`"${state.path}" is not a Codex rollout of thread ${threadId}`);
  }
  const sessionsDir = join(codexHome, 'sessions');
  const local = await findRollout(sessionsDir, threadId);
  const path = join(sessionsDir, local ?? state.path);
  if (relative(sessionsDir, path).startsWith('..')) throw new Error(`"${state.path}" leaves the sessions folder`);
  // No local copy yet: the stored state is written in full.
  const localContent = await readFile(path, 'utf8').catch(() => null);
  if (
    !exact &&
    localContent !== null &&
    localContent.length >= state.content.length &&
    localContent.startsWith(state.content)
  )
    return;
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  await writeFileAtomic(path, state.content);
}
