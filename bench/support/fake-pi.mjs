#!/usr/bin/env node
// A stand-in for pi in the benchmarks. With `--mode rpc` (what sessiond runs)
// it speaks pi's rpc protocol (src/agents/pi/rpc.ts): answers each `get_state`
// command (the session id; streaming until the turn's last line), runs the turn
// on the `prompt` command, refuses other commands, and exits 0 when stdin ends
// and the turn is over. Otherwise (`--mode json --print`: the direct runs of
// e2e and peers) it reads the prompt from stdin to its end, prints the turn,
// and exits. The turn: pi 0.73-like JSON lines (json mode's session header,
// agent_start, the user message, an assistant message streamed as text deltas).
//   default (e2e, scaling): the whole turn in `--messages N` − 2 deltas (20 by
//     default), then message_end, turn_end, agent_end, and exit 0; sessiond's
//     PiMapper turns that into exactly N messages: session.started, N − 2
//     `assistant` deltas, terminal.completed.
//   --hang (queue benchmark's cancel runs): three deltas, then it waits
//     forever, as pi does while the model is thinking; SIGTERM/SIGINT end it at
//     once (pi's own behaviour: cooperative)…
//   --hang --stubborn: …or are ignored; only the SIGKILL stage stops it.
//   --every MS (peers benchmark's kill -9 runs): the default turn, one line
//     every MS milliseconds instead of all at once: an attempt that is still
//     running when its worker dies.
//   --steer (steer benchmark, rpc mode only): the assistant message ends with
//     a bash tool call whose command says when the prompt was read (`# prompt
//     read at <Date.now()>`: the benchmark reads it in the log), and the tool
//     runs until a `steer` command comes: then (as pi, at the tool's end) the
//     tool's result, `steer arrived at <ms>`, the steer echoed as a user
//     message, and the next tool call, which runs until the next steer; forever,
//     until the process is stopped (SIGTERM ends it at once). SIGUSR1 ends the
//     running tool with no steer (the next tool call follows): the tool
//     boundary at which sessiond restarts an agent without a native channel.
// Other arguments (pi's --print, --session-dir …) are ignored.
import { randomUUID } from 'node:crypto';

const steer = process.argv.includes('--steer');
const hang = process.argv.includes('--hang') || steer;
const rpc = process.argv[process.argv.indexOf('--mode') + 1] === 'rpc';
const at = process.argv.indexOf('--messages');
const messages = at >= 0 ? Number(process.argv[at + 1]) : 20;
const everyAt = process.argv.indexOf('--every');
const every = everyAt >= 0 ? Number(process.argv[everyAt + 1]) : 0;
if (!Number.isInteger(messages) || messages < 2) {
  process.stderr.write('fake-pi: --messages must be an integer ≥ 2\n');
  process.exit(2);
}
if (hang) {
  if (process.argv.includes('--stubborn')) {
    process.on('SIGINT', () => {});
    process.on('SIGTERM', () => {});
  }
  setInterval(() => {}, 1 << 30);
}

const TURN_DELTAS = [
  'Looking at the session store, ',
  'the writer batches every ',
  'message of a transition ',
  'into one fenced Lua call; ',
  'the lease is checked first. ',
];
const deltas = hang
  ? ['Reading the session ', 'store first, ', 'then the writer…']
  : Array.from({ length: messages - 2 }, (_, i) => TURN_DELTAS[i % TURN_DELTAS.length]);

const sessionId = randomUUID();
const lines = [];
const emit = (event) => lines.push(JSON.stringify(event));
/** The turn was prompted and its last line is not written yet (with --hang: forever). */
let running = false;
/** stdin ended (rpc mode): exit once the turn is over. */
let over = false;

function turn(prompt) {
  running = true;
  const now = Date.now();
  promptReadAt = now;
  const output = hang ? 0 : 20 * deltas.length;
  const usage = {
    input: hang ? 0 : 1200,
    output,
    cacheRead: 0,
    cacheWrite: 0,
    totalTokens: (hang ? 0 : 1200) + output,
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
  };
  // rpc mode has no header line: the session id is in get_state's answer.
  if (!rpc)
    emit({ type: 'session', version: 3, id: sessionId, timestamp: new Date(now).toISOString(), cwd: process.cwd() });
  emit({ type: 'agent_start' });
  emit({ type: 'turn_start' });
  const user = { role: 'user', content: [{ type: 'text', text: prompt }], timestamp: now };
  emit({ type: 'message_start', message: user });
  emit({ type: 'message_end', message: user });
  const assistant = {
    role: 'assistant',
    content: [],
    api: 'openai-completions',
    provider: 'fake',
    model: 'bench',
    usage,
    stopReason: 'stop',
    timestamp: now,
  };
  if (steer) {
    toolCall(assistant);
    process.stdout.write(`${lines.join('\n')}\n`);
    return;
  }
  emit({ type: 'message_start', message: assistant });
  const block = { type: 'text', text: '' };
  assistant.content.push(block);
  for (const delta of deltas) {
    block.text += delta;
    emit({
      type: 'message_update',
      assistantMessageEvent: { type: 'text_delta', contentIndex: 0, delta, partial: assistant },
      message: assistant,
    });
  }
  if (!hang) {
    emit({ type: 'message_end', message: assistant });
    emit({ type: 'turn_end', message: assistant, toolResults: [] });
    emit({ type: 'agent_end', messages: [user, assistant] });
  }
  // With --hang, nothing more: the model "thinks" until the process is stopped.
  if (every > 0) {
    let i = 0;
    const timer = setInterval(() => {
      process.stdout.write(`${lines[i]}\n`);
      i += 1;
      if (i === lines.length) {
        clearInterval(timer);
        turnWritten();
      }
    }, every);
  } else {
    process.stdout.write(`${lines.join('\n')}\n`);
    turnWritten();
  }
}

function turnWritten() {
  if (hang) return;
  running = false;
  if (over) process.exit(0);
}

/** --steer: the tool call running now (its id), and how many there were; when the prompt was read. */
let tools = 0;
let runningTool = '';
let promptReadAt = 0;
if (steer) process.on('SIGUSR1', () => running && steered(null, 0));

/** --steer: `assistant` ends with a bash tool call, and the tool starts (it runs until the next steer). */
function toolCall(assistant) {
  tools += 1;
  runningTool = `call_fake_${tools}`;
  const args = { command: `sleep infinity # prompt read at ${promptReadAt}` };
  const message = { ...assistant, content: [{ type: 'toolCall', id: runningTool, name: 'bash', arguments: args }] };
  emit({ type: 'message_start', message: { ...assistant, content: [] } });
  emit({ type: 'message_end', message: { ...message, stopReason: 'toolUse' } });
  emit({ type: 'tool_execution_start', toolCallId: runningTool, toolName: 'bash', args });
}

/** --steer: pi's safe point after the running tool: its result, the steer (if any) as a user message, the next tool call. */
function steered(text, arrivedAt) {
  lines.length = 0;
  const now = Date.now();
  const result = { content: [{ type: 'text', text: text === null ? 'done\n' : `steer arrived at ${arrivedAt}\n` }] };
  emit({ type: 'tool_execution_end', toolCallId: runningTool, toolName: 'bash', result, isError: false });
  const toolResult = { role: 'toolResult', toolCallId: runningTool, toolName: 'bash', ...result, isError: false };
  emit({ type: 'message_start', message: { ...toolResult, timestamp: now } });
  emit({ type: 'message_end', message: { ...toolResult, timestamp: now } });
  emit({ type: 'turn_end', message: { role: 'assistant', content: [] }, toolResults: [toolResult] });
  emit({ type: 'turn_start' });
  if (text !== null) {
    const user = { role: 'user', content: [{ type: 'text', text }], timestamp: now };
    emit({ type: 'message_start', message: user });
    emit({ type: 'message_end', message: user });
  }
  const usage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0 };
  const cost = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 };
  const assistant = { role: 'assistant', content: [], api: 'openai-completions', provider: 'fake', model: 'bench' };
  toolCall({ ...assistant, usage: { ...usage, cost }, stopReason: 'stop', timestamp: now });
  process.stdout.write(`${lines.join('\n')}\n`);
}

const answer = (response) => process.stdout.write(`${JSON.stringify({ type: 'response', ...response })}\n`);

/** One rpc command: a line of stdin. */
function command(line) {
  let cmd;
  try {
    cmd = JSON.parse(line);
  } catch {
    return; // not a command: pi answers nothing either
  }
  if (cmd.type === 'get_state') {
    const data = { sessionId, isStreaming: running, isCompacting: false };
    answer({ id: cmd.id, command: 'get_state', success: true, data });
  } else if (cmd.type === 'prompt' && !running) {
    answer({ id: cmd.id, command: 'prompt', success: true });
    turn(String(cmd.message ?? ''));
  } else if (cmd.type === 'steer' && steer && running) {
    const arrivedAt = Date.now();
    answer({ id: cmd.id, command: 'steer', success: true });
    steered(String(cmd.message ?? ''), arrivedAt);
  } else answer({ id: cmd.id, command: cmd.type, success: false, error: 'fake-pi: not supported' });
}

let input = '';
process.stdin.setEncoding('utf8');
if (rpc) {
  process.stdin.on('data', (chunk) => {
    input += chunk;
    for (let end = input.indexOf('\n'); end >= 0; end = input.indexOf('\n')) {
      const line = input.slice(0, end);
      input = input.slice(end + 1);
      command(line);
    }
  });
  process.stdin.on('end', () => {
    over = true;
    if (!running) process.exit(0);
  });
} else {
  process.stdin.on('data', (chunk) => {
    input += chunk;
  });
  process.stdin.on('end', () => turn(input));
}
