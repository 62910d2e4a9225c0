import { randomUUID } from 'node:crypto';
import { chmodSync, copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Fake pi executables for the process-level benchmarks, written into a temp
 * dir (executable, outside the repo, so a checkout's file modes do not matter):
 *
 * - `nodeTurn`: support/fake-pi.mjs, a Node process that takes the prompt
 *   and prints one whole pi turn of `--messages N` messages, then exits. What
 *   a real pi costs to start (a Node runtime) without the model.
 * - `shTurn`: the same lines from a /bin/sh script (builtins only: no fork
 *   beyond the shell itself): the cheapest agent process there is, so what is
 *   left to measure is sessiond.
 * - `shHang`: a /bin/sh script that prints the start of a turn (the session
 *   header, the user message, two assistant deltas), then `exec sleep`: a
 *   long-running session as pi is while the model thinks, at the memory cost
 *   of a `sleep` process (HANG_CMDLINE finds them). SIGTERM (sessiond's interrupt signal for pi) ends it.
 *
 * Each speaks pi's rpc protocol when its argv has `--mode rpc` (as sessiond runs pi: commands on
 * stdin, src/agents/pi/rpc.ts), and reads the prompt on stdin to its end otherwise (the benchmarks'
 * direct runs, `--mode json --print`).
 */
/**
 * How long the long-running fake sleeps: longer than any benchmark that uses it, short enough that
 * one orphaned by a killed run does not linger for long, and an unusual number, so that its
 * processes can be found (`sleep` NUL this, in /proc/<pid>/cmdline).
 */
export const HANG_SECONDS = 907;
export const HANG_CMDLINE = `sleep\u0000${HANG_SECONDS}`;

export interface FakeAgents {
  dir: string;
  nodeTurn: string;
  shTurn: string;
  shHang: string;
  /** pi's `--agent-dir` source and sessiond's state dir for the workers (empty, in the temp dir). */
  agentDir: string;
  stateDir: string;
}

const HERE = dirname(fileURLToPath(import.meta.url));
/** The assistant deltas of a fake turn, in order, cycling (as support/fake-pi.mjs and support/fake-agent.ts print them). */
export const FAKE_DELTAS = [
  'Looking at the session store, ',
  'the writer batches every ',
  'message of a transition ',
  'into one fenced Lua call; ',
  'the lease is checked first. ',
];

/** pi 0.73 `--mode json` lines of one turn whose assistant text comes in `deltas` updates; `complete` adds message_end, turn_end, agent_end. */
export function piTurnLines(deltas: number, complete: boolean): string[] {
  const lines: string[] = [];
  const emit = (event: unknown): void => void lines.push(JSON.stringify(event));
  const now = Date.now();
  const usage = {
    input: 1200,
    output: 20 * deltas,
    cacheRead: 0,
    cacheWrite: 0,
    totalTokens: 1200 + 20 * deltas,
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
  };
  emit({ type: 'session', version: 3, id: randomUUID(), timestamp: new Date(now).toISOString(), cwd: '/tmp' });
  emit({ type: 'agent_start' });
  emit({ type: 'turn_start' });
  const user = {
    role: 'user',
    content: [{ type: 'text', text: 'Summarize the session store in one paragraph.' }],
    timestamp: now,
  };
  emit({ type: 'message_start', message: user });
  emit({ type: 'message_end', message: user });
  const block = { type: 'text', text: '' };
  const assistant = {
    role: 'assistant',
    content: [block],
    api: 'openai-completions',
    provider: 'fake',
    model: 'bench',
    usage,
    stopReason: 'stop',
    timestamp: now,
  };
  emit({ type: 'message_start', message: { ...assistant, content: [] } });
  for (let i = 0; i < deltas; i += 1) {
    const delta = FAKE_DELTAS[i % FAKE_DELTAS.length] ?? '';
    block.text += delta;
    emit({
      type: 'message_update',
      assistantMessageEvent: { type: 'text_delta', contentIndex: 0, delta, partial: assistant },
      message: assistant,
    });
  }
  if (complete) {
    emit({ type: 'message_end', message: assistant });
    emit({ type: 'turn_end', message: assistant, toolResults: [] });
    emit({ type: 'agent_end', messages: [user, assistant] });
  }
  return lines;
}

const shQuote = (s: string): string => `'${s.replaceAll("'", `'\\''`)}'`;

/**
 * A /bin/sh fake printing `lines` (a `--mode json` turn, session header first) as pi would, then
 * running `then`. `--mode rpc` (what sessiond runs): answers each `get_state` command (the header's
 * session id, nothing running: the turn is printed at once), prints the turn on the `prompt` command
 * (without the header) and runs `then` after it if that is not `exit 0`, refuses other commands, and
 * exits 0 when stdin ends. Otherwise (the direct runs) it reads the prompt to its end, prints, runs
 * `then`. Builtins only either way (the command's id is cut out by parameter expansion).
 */
function shScript(lines: readonly string[], then: string): string {
  const [header = '', ...turn] = lines;
  const sessionId = String((JSON.parse(header) as { id?: unknown }).id);
  const answer = (rest: string): string => `printf '%s\\n' '{"id":"'"$_id"'","type":"response",${rest}}'`;
  return [
    '#!/bin/sh',
    '# A fake pi for sessiond benchmarks (generated by bench/support/fake-agents.ts). Prints pi JSON lines:',
    '# after reading the prompt to its end, or, with `--mode rpc`, as pi rpc mode does.',
    '_rpc=',
    'while [ $# -gt 0 ]; do',
    '  if [ "$1" = --mode ] && [ "$2" = rpc ]; then _rpc=1; fi',
    '  shift',
    'done',
    'if [ -z "$_rpc" ]; then',
    '  while IFS= read -r _line; do :; done',
    `  printf '%s\\n' ${lines.map(shQuote).join(' ')}`,
    `  ${then}`,
    'fi',
    'while IFS= read -r _line; do',
    `  _id=\${_line#*'"id":"'}`,
    `  _id=\${_id%%'"'*}`,
    '  case $_line in',
    `    *'"type":"get_state"'*) ${answer(`"command":"get_state","success":true,"data":{"sessionId":"${sessionId}","isStreaming":false,"isCompacting":false}`)} ;;`,
    `    *'"type":"prompt"'*) ${answer('"command":"prompt","success":true')}`,
    `      printf '%s\\n' ${turn.map(shQuote).join(' ')}`,
    then === 'exit 0' ? '      ;;' : `      ${then} ;;`,
    `    *) ${answer('"command":"unknown","success":false,"error":"fake pi: not supported"')} ;;`,
    '  esac',
    'done',
    'exit 0',
    '',
  ].join('\n');
}

/** Writes the fakes into `dir` (created); `messages`: what one turn of `nodeTurn`/`shTurn` yields, session.started and terminal.completed included. */
export function writeFakeAgents(dir: string, messages: number): FakeAgents {
  if (!Number.isInteger(messages) || messages < 2) throw new Error(`messages must be an integer ≥ 2 (got ${messages})`);
  mkdirSync(dir, { recursive: true });
  const nodeTurn = join(dir, 'fake-pi.mjs');
  copyFileSync(join(HERE, 'fake-pi.mjs'), nodeTurn);
  const shTurn = join(dir, 'fake-pi-turn.sh');
  writeFileSync(shTurn, shScript(piTurnLines(messages - 2, true), 'exit 0'));
  const shHang = join(dir, 'fake-pi-hang.sh');
  writeFileSync(shHang, shScript(piTurnLines(2, false), `exec sleep ${HANG_SECONDS}`));
  for (const file of [nodeTurn, shTurn, shHang]) chmodSync(file, 0o755);
  const agentDir = join(dir, 'agent');
  const stateDir = join(dir, 'state');
  mkdirSync(agentDir, { recursive: true });
  mkdirSync(stateDir, { recursive: true });
  return { dir, nodeTurn, shTurn, shHang, agentDir, stateDir };
}
