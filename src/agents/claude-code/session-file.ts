import { homedir } from 'node:os';
import { mkdir, readdir, readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { cutAfterToolResult } from '../shared/jsonl-cut.ts';
import { writeFileAtomic } from '../shared/managed-files.ts';
import { shown, stateObject, stringField } from '../shared/state-check.ts';

/**
 * Claude Code keeps a conversation in one append-only file per session:
 * `<configDir>/projects/<cwd with every non-alphanumeric as "-">/<sessionId>.jsonl`, where
 * configDir is $CLAUDE_CONFIG_DIR or ~/.claude. `--resume <id>` finds the file by id under any
 * project dir, whatever the cwd (measured with 2.1.332: a file copied into a fresh HOME, under
 * another project dir name, resumes with the same session id). To let the next attempt of a
 * session run on another host, the file travels with the session (the runtime stores it after
 * each attempt and puts it back before the next one). Subagent transcripts are not carried.
 */
export const CLAUDE_SESSION_STATE_VERSION = 1;

export interface ClaudeSessionState {
  version: typeof CLAUDE_SESSION_STATE_VERSION;
  /** The project dir name it was found under (where it goes back when no cwd is known). */
  projectDir: string;
  content: string;
}

const SESSION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const PROJECT_DIR = /^[\w.-]{1,255}$/;

/** Where Claude Code keeps its settings and sessions, from the agent options as the runtime has them. */
export function claudeConfigDir(
  options: Readonly<Record<string, unknown>>,
  base: NodeJS.ProcessEnv = process.env,
): string {
  if (typeof options.configDir === 'string' && options.configDir !== '') return resolve(options.configDir);
  const env = options.env !== null && typeof options.env === 'object' ? (options.env as Record<string, unknown>) : {};
  const fromEnv = typeof env.CLAUDE_CONFIG_DIR === 'string' ? env.CLAUDE_CONFIG_DIR : base.CLAUDE_CONFIG_DIR;
  if (fromEnv !== undefined && fromEnv !== '') return resolve(fromEnv);
  const home = typeof env.HOME === 'string' && env.HOME !== '' ? env.HOME : (base.HOME ?? homedir());
  return join(home, '.claude');
}

/** Claude Code's project dir name for a cwd (long paths are cut: the name does not matter for `--resume`). */
export function projectDirName(cwd: string): string {
  return resolve(cwd)
    .replace(/[^a-zA-Z0-9]/g, '-')
    .slice(0, 200);
}

async function findProjectDir(projectsDir: string, sessionId: string): Promise<string | null> {
  let dirs: string[];
  try {
    dirs = await readdir(projectsDir);
  } catch {
    // No projects folder: the session was never written on this host.
    return null;
  }
  for (const dir of dirs) {
    // A project folder that cannot be read does not hold the session.
    const names = await readdir(join(projectsDir, dir)).catch(() => [] as string[]);
    if (names.includes(`${sessionId}.jsonl`)) return dir;
  }
  return null;
}

export async function exportClaudeSession(configDir: string, sessionId: string): Promise<ClaudeSessionState | null> {
  if (!SESSION_ID.test(sessionId)) return null;
  const projectsDir = join(resolve(configDir), 'projects');
  const projectDir = await findProjectDir(projectsDir, sessionId);
  if (projectDir === null) return null;
  const content = await readFile(join(projectsDir, projectDir, `${sessionId}.jsonl`), 'utf8');
  return { version: CLAUDE_SESSION_STATE_VERSION, projectDir, content };
}

/** Reads an exported state, whatever version wrote it; throws on a shape it does not know. */
export function parseClaudeSessionState(raw: string): ClaudeSessionState {
  const value = JSON.parse(raw) as Partial<ClaudeSessionState>;
  if (
    value.version !== CLAUDE_SESSION_STATE_VERSION ||
    typeof value.content !== 'string' ||
    typeof value.projectDir !== 'string'
  ) {
    throw new Error(`unknown claude-code session state (version ${String(value.version)})`);
  }
  return { version: value.version, projectDir: value.projectDir, content: value.content };
}

/** A state as an archive brings it: `sessionId` is a Claude Code session id (a UUID), the project dir a plain name. Throws naming the field. */
export function checkClaudeState(raw: string, sessionId: string): ClaudeSessionState {
  if (!SESSION_ID.test(sessionId))
    throw new Error(`field: ${shown(sessionId)} is not a Claude Code session id (a UUID)`);
  const state = stateObject(raw, ['version', 'projectDir', 'content']);
  if (state.version !== CLAUDE_SESSION_STATE_VERSION)
    throw new Error(`value.version: must be ${CLAUDE_SESSION_STATE_VERSION}`);
  const projectDir = stringField(state, 'projectDir');
  if (!PROJECT_DIR.test(projectDir) || projectDir === '.' || projectDir === '..')
    throw new Error(`value.projectDir: ${shown(projectDir)} is not a Claude Code project dir name`);
  return { version: CLAUDE_SESSION_STATE_VERSION, projectDir, content: stringField(state, 'content') };
}

/**
 * Puts a session file back under `configDir`, unless a local copy is already the same or
 * further along (a same-host run) and not `exact`: next to a local copy if there is one, else
 * under the project dir of `cwd` (or the one it came from). `exact`: the stored state replaces a
 * local copy that is further along (a workspace session going back to its recorded point after a
 * cancelled or failed attempt: the local copy holds tool calls whose effects the files no longer have).
 */
export async function importClaudeSession(
  configDir: string,
  sessionId: string,
  state: ClaudeSessionState,
  cwd?: string,
  exact = false,
): Promise<void> {
  if (!SESSION_ID.test(sessionId)) throw new Error(`"${sessionId}" is not a Claude Code session id`);
  if (!PROJECT_DIR.test(state.projectDir) || state.projectDir === '.' || state.projectDir === '..') {
    throw new Error(`"${state.projectDir}" is not a Claude Code project dir name`);
  }
  const projectsDir = join(resolve(configDir), 'projects');
  const local = await findProjectDir(projectsDir, sessionId);
  const dir = join(projectsDir, local ?? (cwd === undefined ? state.projectDir : projectDirName(cwd)));
  const path = join(dir, `${sessionId}.jsonl`);
  // No local copy yet: the stored state is written in full.
  const existing = local === null ? null : await readFile(path, 'utf8').catch(() => null);
  if (!exact && existing !== null && existing.startsWith(state.content)) return;
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await writeFileAtomic(path, state.content);
}

/**
 * The session file cut just after the line that records the result of tool call `toolCallId` (Claude
 * Code appends a `user` entry holding the `tool_result` block once the tool has ended); null when the
 * file holds no such line yet. The file is append-only JSONL, so a prefix of its lines is a file Claude
 * Code wrote: `--resume` goes on from that result. `later`: a tool call was written after it (the
 * model asked for more tools, which may be running).
 */
export function claudeStateAfterTool(
  state: ClaudeSessionState,
  toolCallId: string,
): { state: ClaudeSessionState; later: boolean } | null {
  const cut = cutAfterToolResult(state.content, toolCallId, {
    isResult: isToolResultOf,
    laterCall: '"type":"tool_use"',
    wholeLines: true,
  });
  return cut === null ? null : { state: { ...state, content: cut.content }, later: cut.later };
}

function isToolResultOf(line: string, toolCallId: string): boolean {
  try {
    const entry = JSON.parse(line) as { type?: unknown; message?: { content?: unknown } };
    const blocks = entry.message?.content;
    return (
      entry.type === 'user' &&
      Array.isArray(blocks) &&
      blocks.some(
        (block: { type?: unknown; tool_use_id?: unknown }) =>
          block.type === 'tool_result' && block.tool_use_id === toolCallId,
      )
    );
  } catch {
    // A line that is not JSON (torn) records nothing.
    return false;
  }
}
