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

/**
 * The rollout's records of the tool items sessiond's mapper reports as tool calls (tool-items.ts: command_execution,
 * file_change, mcp_tool_call, web_search), each with the call's `call_id` as its id. Only `CommandExecution` was
 * seen in the recordings; the others are named as Codex names its items.
 */
const TOOL_ITEMS = new Set(['CommandExecution', 'FileChange', 'McpToolCall', 'WebSearch']);
/** Response items asking for a tool, which an output item with the same `call_id` answers. */
const CALLS = new Set(['function_call', 'custom_tool_call', 'local_shell_call']);

/**
 * The rollout cut just after the outputs of the first `toolCallsEnded` tool calls that Codex's current turn
 * completed; null when it does not record them all yet. `codex exec --json` numbers its items itself
 * (`item_0`, `item_1`, …, counting messages, reasoning and warnings too), so its ids are not the rollout's call
 * ids; but it reports a tool item when Codex completes it, as the rollout records it (an `item_completed` event
 * whose item id is the call id), in the same order: the k-th tool item a run of `codex exec` reports is the
 * k-th of the rollout's last turn (a run is one turn, from its `task_started`). A command the sandbox refused
 * is neither reported nor recorded as an item (measured with 0.171: it has a call and an output only).
 *
 * The rollout is append-only JSONL, so a prefix of its lines is a rollout Codex wrote: `codex exec resume`
 * goes on from those outputs (measured with 0.171: the next request holds the call and its output, then the
 * new prompt). `later`: the rollout holds a call without its output in the cut, or one after it (the model
 * asked for more tools, which may be running). A last line without its newline is still being written.
 */
export function codexStateAfterTool(
  state: CodexRolloutState,
  toolCallsEnded: number,
): { state: CodexRolloutState; later: boolean } | null {
  if (!Number.isInteger(toolCallsEnded) || toolCallsEnded < 1) return null;
  const lines = wholeLines(state.content);
  let turn = -1;
  for (let i = lines.length - 1; i >= 0 && turn === -1; i--) {
    if (lines[i]?.text.includes('"task_started"') === true && payloadOf(lines[i]?.text)?.type === 'task_started')
      turn = i;
  }
  if (turn === -1) return null;
  /** The current turn's tool items, in the order Codex completed them: their call ids and lines. */
  const items: { id: string; at: number; webSearch: boolean }[] = [];
  const outputs = new Map<string, number>();
  const calls: { id: string; at: number }[] = [];
  for (let i = turn + 1; i < lines.length; i++) {
    const text = lines[i]?.text ?? '';
    // Only these lines are parsed: a turn's other lines may be long (instructions, outputs of other kinds).
    if (!text.includes('"item_completed"') && !text.includes('"call_id"') && !text.includes('"turn_aborted"')) continue;
    const payload = payloadOf(text);
    if (payload === null) continue;
    const kind = typeof payload.type === 'string' ? payload.type : '';
    // The turn was interrupted: what Codex records after that (the cut-short call's end) is no completed tool.
    if (kind === 'turn_aborted') break;
    const callId = typeof payload.call_id === 'string' ? payload.call_id : null;
    if (kind === 'item_completed') {
      const item = payload.item as { type?: unknown; id?: unknown } | undefined;
      if (typeof item?.type === 'string' && TOOL_ITEMS.has(item.type) && typeof item.id === 'string')
        items.push({ id: item.id, at: i, webSearch: item.type === 'WebSearch' });
    } else if (callId !== null && kind.endsWith('_output')) {
      if (!outputs.has(callId)) outputs.set(callId, i);
    } else if (callId !== null && CALLS.has(kind)) calls.push({ id: callId, at: i });
  }
  if (items.length < toolCallsEnded) return null;
  let last = -1;
  for (const item of items.slice(0, toolCallsEnded)) {
    const output = outputs.get(item.id);
    // A web search runs on the model's side: no output follows its item.
    if (output === undefined && !item.webSearch) return null;
    last = Math.max(last, item.at, output ?? -1);
  }
  const later = calls.some((call) => {
    const output = outputs.get(call.id);
    return call.at > last || output === undefined || output > last;
  });
  const end = lines[last]?.end ?? 0;
  return { state: { ...state, content: state.content.slice(0, end) }, later };
}

/** The whole lines of a JSONL text (a last line without its newline is left out), each with where it ends. */
function wholeLines(content: string): { text: string; end: number }[] {
  const lines: { text: string; end: number }[] = [];
  let start = 0;
  for (let newline = content.indexOf('\n'); newline !== -1; newline = content.indexOf('\n', start)) {
    lines.push({ text: content.slice(start, newline), end: newline + 1 });
    start = newline + 1;
  }
  return lines;
}

/** The `payload` of a rollout line, or null (a line that is not a JSON object with one). */
function payloadOf(line: string | undefined): Record<string, unknown> | null {
  if (line === undefined || !line.includes('"payload"')) return null;
  try {
    const payload = (JSON.parse(line) as { payload?: unknown }).payload;
    return payload !== null && typeof payload === 'object' ? (payload as Record<string, unknown>) : null;
  } catch {
    // A line that is not JSON records nothing.
    return null;
  }
}
