import { mkdir, readdir, readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { cutAfterToolResult } from '../shared/jsonl-cut.ts';
import { writeFileAtomic } from '../shared/managed-files.ts';
import { shown, stateObject, stringField } from '../shared/state-check.ts';

/**
 * pi keeps a conversation in one append-only file per session:
 * `<sessionDir>/<timestamp>_<sessionId>.jsonl`, whose first line is a header
 * `{type:"session", id, cwd, …}`. To let the next attempt of a session run on
 * another host, the file travels with the session (the runtime stores it in
 * Redis after each attempt and puts it back before the next one).
 */
export interface PiSessionState {
  fileName: string;
  content: string;
}

const FILE_NAME = /^[\w.:-]+_([0-9a-f-]{8,64})\.jsonl$/;
/** A pi session id, as pi writes it in its file names (a UUID); never an option (no leading `-`). */
const SESSION_ID = /^[0-9a-f][0-9a-f-]{7,63}$/;

/**
 * A state as an archive (or Redis) brings it: `sessionId` is a pi session id and the state is that
 * session's own file (its name ends in `_<sessionId>.jsonl`, no folder). Throws naming the field.
 */
export function checkPiState(raw: string, sessionId: string): PiSessionState {
  if (!SESSION_ID.test(sessionId))
    throw new Error(`field: ${shown(sessionId)} is not a pi session id (lowercase hex and -, 8-64 characters)`);
  const state = stateObject(raw, ['fileName', 'content']);
  const content = stringField(state, 'content');
  const fileName = stringField(state, 'fileName');
  const id = FILE_NAME.exec(fileName)?.[1];
  if (id === undefined)
    throw new Error(
      `value.fileName: ${shown(fileName)} is not a file name pi writes (<time>_<session id>.jsonl, no folder)`,
    );
  if (id !== sessionId)
    throw new Error(`value.fileName: ${shown(fileName)} is the file of pi session ${id}, not of ${sessionId}`);
  return { fileName, content };
}

async function findFile(sessionDir: string, sessionId: string): Promise<string | null> {
  let names: string[];
  try {
    names = await readdir(sessionDir);
  } catch {
    // No session folder: the session was never written on this host.
    return null;
  }
  return names.find((name) => FILE_NAME.exec(name)?.[1] === sessionId) ?? null;
}

export async function exportPiSession(sessionDir: string, sessionId: string): Promise<PiSessionState | null> {
  const fileName = await findFile(resolve(sessionDir), sessionId);
  if (fileName === null) return null;
  const content = await readFile(join(resolve(sessionDir), fileName), 'utf8');
  return { fileName, content };
}

/**
 * Puts a session file back in `sessionDir`, unless the local copy already is
 * the same or further along (a same-host run). The header's `cwd` is set to
 * `cwd` when given: pi refuses to resume a session whose stored cwd does not
 * exist on this host, and runs its tools there.
 */
export async function importPiSession(
  sessionDir: string,
  state: PiSessionState,
  cwd?: string,
  sessionId?: string,
  exact = false,
): Promise<void> {
  const id = FILE_NAME.exec(state.fileName)?.[1];
  if (id === undefined) throw new Error(`pi session file name "${state.fileName}" is not one pi writes`);
  // Only the file of the session being resumed: never another session's (a hostile state naming it).
  if (sessionId !== undefined && id !== sessionId)
    throw new Error(`pi session file "${state.fileName}" is not the one of session ${sessionId}`);
  const dir = resolve(sessionDir);
  await mkdir(dir, { recursive: true });
  const content = cwd === undefined ? state.content : withCwd(state.content, resolve(cwd));
  const path = join(dir, state.fileName);
  // No local copy yet: the stored state is written in full.
  const local = await readFile(path, 'utf8').catch(() => null);
  if (!exact && local !== null && local.length >= content.length && bodyOf(local).startsWith(bodyOf(content))) return;
  await writeFileAtomic(path, content);
}

/**
 * The session file cut just after the entry that records the result of tool call `toolCallId`
 * (pi appends a `toolResult` message entry once the tool has ended); null when the file holds no
 * such entry yet. pi's file is append-only, so a prefix of its lines is a file pi wrote. `later`:
 * a tool call was written after it (an assistant message asking for more tools).
 */
export function piStateAfterTool(
  state: PiSessionState,
  toolCallId: string,
): { state: PiSessionState; later: boolean } | null {
  const cut = cutAfterToolResult(state.content, toolCallId, {
    isResult: isToolResultOf,
    laterCall: '"toolCall"',
    wholeLines: false,
  });
  return cut === null ? null : { state: { ...state, content: cut.content }, later: cut.later };
}

function isToolResultOf(line: string, toolCallId: string): boolean {
  try {
    const entry = JSON.parse(line) as { type?: unknown; message?: { role?: unknown; toolCallId?: unknown } };
    return entry.type === 'message' && entry.message?.role === 'toolResult' && entry.message.toolCallId === toolCallId;
  } catch {
    // A line that is not JSON (a torn last line) records nothing.
    return false;
  }
}

/**
 * The mark of a session file for `piStateAtMark`: its count of whole lines (a torn last line, being
 * written, is not one). Lines rather than bytes: the header line is rewritten on import (its `cwd`,
 * and its `id` in a fork), so a byte length would not survive the trip; its count of lines does.
 */
export function piStateMark(state: PiSessionState): number {
  let lines = 0;
  for (let at = state.content.indexOf('\n'); at !== -1; at = state.content.indexOf('\n', at + 1)) lines += 1;
  return lines;
}

/**
 * The session file as it stood at `mark` (its first `mark` lines): pi's file is append-only, so a
 * prefix of its lines is a file pi wrote (the conversation up to that point). Throws when the file
 * holds fewer lines than `mark`, or `mark` is not a positive integer (the header is line 1).
 */
export function piStateAtMark(state: PiSessionState, mark: number): PiSessionState {
  if (!Number.isSafeInteger(mark) || mark < 1)
    throw new Error(`mark: must be a whole number of lines ≥ 1 (got ${mark})`);
  let end = 0;
  for (let line = 0; line < mark; line += 1) {
    const newline = state.content.indexOf('\n', end);
    if (newline === -1)
      throw new Error(`mark: the session file "${state.fileName}" holds ${line} whole lines, not ${mark}`);
    end = newline + 1;
  }
  return { ...state, content: state.content.slice(0, end) };
}

/** The same conversation under another session id: the file name and the header's `id` (the entries do not repeat it). */
export function forkPiSession(state: PiSessionState, from: string, to: string): PiSessionState {
  const match = FILE_NAME.exec(state.fileName);
  if (match?.[1] !== from) throw new Error(`pi session file "${state.fileName}" is not the one of session ${from}`);
  const renamed = `${state.fileName.slice(0, state.fileName.length - `${from}.jsonl`.length)}${to}.jsonl`;
  if (FILE_NAME.exec(renamed)?.[1] !== to) throw new Error(`"${to}" is not a pi session id`);
  const newline = state.content.indexOf('\n');
  const headerLine = newline === -1 ? state.content : state.content.slice(0, newline);
  const header = JSON.parse(headerLine) as Record<string, unknown>;
  if (header.type !== 'session' || header.id !== from)
    throw new Error(`pi session file "${state.fileName}": its first line is not the header of session ${from}`);
  return {
    fileName: renamed,
    content: JSON.stringify({ ...header, id: to }) + (newline === -1 ? '' : state.content.slice(newline)),
  };
}

function withCwd(content: string, cwd: string): string {
  const newline = content.indexOf('\n');
  const headerLine = newline === -1 ? content : content.slice(0, newline);
  try {
    const header = JSON.parse(headerLine) as Record<string, unknown>;
    if (header.type !== 'session' || header.cwd === cwd) return content;
    return JSON.stringify({ ...header, cwd }) + (newline === -1 ? '' : content.slice(newline));
  } catch {
    // A header that is not JSON is kept as it is.
    return content;
  }
}

function bodyOf(content: string): string {
  const newline = content.indexOf('\n');
  return newline === -1 ? '' : content.slice(newline);
}
