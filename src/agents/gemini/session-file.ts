import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, realpath, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { cutAfterToolResult } from '../shared/jsonl-cut.ts';
import { writeFileAtomic } from '../shared/managed-files.ts';
import { shown, stateObject, stringField } from '../shared/state-check.ts';

/**
 * gemini 0.61 keeps a conversation in one append-only JSONL file per session:
 * `<GEMINI_CLI_HOME>/.gemini/tmp/<project>/chats/session-<YYYY-MM-DDTHH-MM>-<first 8 of id>.jsonl`,
 * whose first line is `{sessionId, projectHash, startTime, lastUpdated, kind}`. `<project>` is a
 * short slug for the cwd, recorded in `.gemini/projects.json` and in `tmp/<project>/.project_root`.
 * `--resume <id>` looks the id up among the chats of the cwd's project.
 *
 * To let the next attempt of a session run on another host, the file travels with the session
 * (the runtime stores it after each attempt and puts it back before the next one).
 */
export interface GeminiSessionState {
  version: 1;
  fileName: string;
  content: string;
}

const FILE_NAME = /^session-[\w.:-]+-([0-9a-f]{8})\.jsonl$/;
const SLUG = /^[a-z0-9-]+$/;

/** Finds the chat file of `sessionId` in any project of the managed gemini dir. */
async function findChatFile(geminiDir: string, sessionId: string): Promise<string | null> {
  const tmp = join(geminiDir, 'tmp');
  // No tmp folder: no chats on this host.
  const projects = await readdir(tmp).catch(() => [] as string[]);
  for (const project of projects) {
    const chats = join(tmp, project, 'chats');
    // A project without a readable chats folder holds no chat.
    const names = await readdir(chats).catch(() => [] as string[]);
    for (const name of names) {
      if (FILE_NAME.exec(name)?.[1] !== sessionId.slice(0, 8)) continue;
      const path = join(chats, name);
      if ((await headerOf(path))?.sessionId === sessionId) return path;
    }
  }
  return null;
}

async function headerOf(path: string): Promise<Record<string, unknown> | null> {
  // An unreadable chat file is not the one looked for.
  const text = await readFile(path, 'utf8').catch(() => null);
  if (text === null) return null;
  const newline = text.indexOf('\n');
  try {
    const header: unknown = JSON.parse(newline === -1 ? text : text.slice(0, newline));
    return header !== null && typeof header === 'object' && !Array.isArray(header)
      ? (header as Record<string, unknown>)
      : null;
  } catch {
    // A chat whose header is not JSON is not the one looked for.
    return null;
  }
}

export async function exportGeminiSession(geminiHome: string, sessionId: string): Promise<GeminiSessionState | null> {
  const path = await findChatFile(join(geminiHome, '.gemini'), sessionId);
  if (path === null) return null;
  const content = await readFile(path, 'utf8');
  return { version: 1, fileName: path.slice(path.lastIndexOf('/') + 1), content };
}

const SESSION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The `sessionId` of a chat file's first line, or null. */
function headerSessionId(content: string): unknown {
  const newline = content.indexOf('\n');
  try {
    const header = JSON.parse(newline === -1 ? content : content.slice(0, newline)) as unknown;
    return header !== null && typeof header === 'object' ? (header as Record<string, unknown>).sessionId : null;
  } catch {
    // A first line that is not JSON is not a chat file's header: not this session's file.
    return null;
  }
}

/**
 * A state as an archive brings it: `sessionId` is a gemini session id (a UUID), the state that
 * session's own chat file (its name ends in the id's first 8 characters, its header names the id). Throws naming the field.
 */
export function checkGeminiState(raw: string, sessionId: string): GeminiSessionState {
  if (!SESSION_ID.test(sessionId)) throw new Error(`field: ${shown(sessionId)} is not a gemini session id (a UUID)`);
  const state = stateObject(raw, ['version', 'fileName', 'content']);
  if (state.version !== 1) throw new Error('value.version: must be 1');
  const fileName = stringField(state, 'fileName');
  const content = stringField(state, 'content');
  const prefix = FILE_NAME.exec(fileName)?.[1];
  if (prefix === undefined)
    throw new Error(
      `value.fileName: ${shown(fileName)} is not a chat file name gemini writes (session-<time>-<8 hex>.jsonl, no folder)`,
    );
  if (prefix !== sessionId.slice(0, 8))
    throw new Error(`value.fileName: ${shown(fileName)} is not a chat file of session ${sessionId}`);
  if (headerSessionId(content) !== sessionId)
    throw new Error(`value.content: its first line does not name session ${sessionId}`);
  return { version: 1, fileName, content };
}

/**
 * Puts a chat file back among the chats of `cwd`'s project in the managed gemini dir, unless
 * the local copy already is the same or further along (a same-host run) and not `exact`. `exact`:
 * the stored state replaces a local copy that is further along (a workspace session going back to
 * its recorded point).
 */
export async function importGeminiSession(
  geminiHome: string,
  state: GeminiSessionState,
  cwd: string,
  exact = false,
): Promise<void> {
  if (state.version !== 1) throw new Error(`gemini session state version ${String(state.version)} is not supported`);
  if (!FILE_NAME.test(state.fileName))
    throw new Error(`gemini chat file name "${state.fileName}" is not one gemini writes`);
  const geminiDir = join(geminiHome, '.gemini');
  // gemini names the project by process.cwd(), which has symlinks resolved.
  const root = await realpath(resolve(cwd)).catch(() => resolve(cwd));
  const slug = await projectSlug(geminiDir, root);
  const chats = join(geminiDir, 'tmp', slug, 'chats');
  await mkdir(chats, { recursive: true, mode: 0o700 });
  const path = join(chats, state.fileName);
  // No local copy yet: the stored state is written in full.
  const local = await readFile(path, 'utf8').catch(() => null);
  if (!exact && local !== null && local.length >= state.content.length && local.startsWith(state.content)) return;
  // A file of that name holding another session's chat is never replaced (a hostile state naming it).
  if (local !== null && headerSessionId(local) !== headerSessionId(state.content))
    throw new Error(`gemini chat file "${state.fileName}" holds another session's chat`);
  await writeFileAtomic(path, state.content);
}

/**
 * The project slug gemini will use for `root`: the one projects.json maps it to, else the
 * directory whose `.project_root` names it (gemini adopts such a directory), else a new one
 * claimed here with its `.project_root`.
 */
async function projectSlug(geminiDir: string, root: string): Promise<string> {
  const tmp = join(geminiDir, 'tmp');
  // No project registry: the project folders are searched instead.
  const registry = await readFile(join(geminiDir, 'projects.json'), 'utf8').catch(() => null);
  if (registry !== null) {
    try {
      const slug = (JSON.parse(registry) as { projects?: Record<string, unknown> }).projects?.[root];
      if (typeof slug === 'string' && SLUG.test(slug) && (await ownerOf(join(tmp, slug))) !== 'other') return slug;
    } catch {
      // gemini resets a corrupt registry; so do we
    }
  }
  // No tmp folder: no project folder to find.
  for (const candidate of await readdir(tmp).catch(() => [] as string[])) {
    // A folder without a readable .project_root is not this project's.
    if ((await readFile(join(tmp, candidate, '.project_root'), 'utf8').catch(() => null))?.trim() === root)
      return candidate;
  }
  const slug = `sessiond-${createHash('sha256').update(root).digest('hex').slice(0, 12)}`;
  await mkdir(join(tmp, slug), { recursive: true, mode: 0o700 });
  await writeFile(join(tmp, slug, '.project_root'), root);
  return slug;

  async function ownerOf(dir: string): Promise<'self' | 'none' | 'other'> {
    // No readable .project_root: the folder is nobody's.
    const owner = await readFile(join(dir, '.project_root'), 'utf8').catch(() => null);
    if (owner === null) return 'none';
    return owner.trim() === root ? 'self' : 'other';
  }
}

/**
 * The chat file cut just after the line that records the result of tool call `toolCallId`; null when the file
 * holds no such line yet. gemini (0.61) appends a message record per line and appends a record again, whole,
 * when it changes (a reader keeps the last record of each id): the model's message is written once its
 * response has streamed, and again with its `toolCalls` (each with its `result` and `status`) once the calls
 * have run; then a `user` record with the same function responses, and the model's next message. So a prefix
 * of its lines is a chat file gemini wrote, and the cut keeps the model's calls with their results but not the
 * separate `user` record: `--resume` rebuilds the function responses from `toolCalls` and would send them
 * twice with it (measured with 0.61: cut there, the next request holds the call, one function response, the
 * placeholder gemini puts after a turn that ended without a model answer, then the new prompt).
 *
 * `later`: the model has answered again after the results (a record of another model message follows):
 * gemini records a tool call only once it has run, so a call in that answer may be running, unseen in the file.
 * A last line without its newline is still being written.
 */
export function geminiStateAfterTool(
  state: GeminiSessionState,
  toolCallId: string,
): { state: GeminiSessionState; later: boolean } | null {
  const cut = cutAfterToolResult(state.content, toolCallId, {
    isResult: isToolResultOf,
    laterCall: (rest, line) => {
      const id = recordOf(line)?.id;
      return rest.split('\n').some((next) => {
        if (!next.includes('"gemini"')) return false;
        const record = recordOf(next);
        return isModelRecord(record) && record.id !== id;
      });
    },
    wholeLines: true,
  });
  return cut === null ? null : { state: { ...state, content: cut.content }, later: cut.later };
}

const DONE = new Set(['success', 'error', 'cancelled']);

/** A model message record whose `toolCalls` hold the call with its result. */
function isToolResultOf(line: string, toolCallId: string): boolean {
  const record = recordOf(line);
  if (!isModelRecord(record) || !Array.isArray(record.toolCalls)) return false;
  return record.toolCalls.some((call: unknown) => {
    const { id, result, status } = (call ?? {}) as { id?: unknown; result?: unknown; status?: unknown };
    return (
      id === toolCallId && result !== undefined && result !== null && typeof status === 'string' && DONE.has(status)
    );
  });
}

function isModelRecord(record: Record<string, unknown> | null): record is Record<string, unknown> {
  return record !== null && record.type === 'gemini' && typeof record.id === 'string';
}

function recordOf(line: string): Record<string, unknown> | null {
  try {
    const record: unknown = JSON.parse(line);
    return record !== null && typeof record === 'object' && !Array.isArray(record)
      ? (record as Record<string, unknown>)
      : null;
  } catch {
    // A line that is not JSON (torn) records nothing.
    return null;
  }
}
