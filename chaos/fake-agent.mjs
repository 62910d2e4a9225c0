#!/usr/bin/env node
// A pi-like agent for `npm run chaos`: speaks pi 0.73's event format (so the pi mapper understands
// it), takes the prompt like pi (`--mode rpc`, as sessiond runs pi: a `prompt` command on stdin, each
// `get_state` answered with the session id and whether the turn runs, other commands refused, exit 0
// when stdin ends once the turn is over; else `--mode json`: stdin to its end), keeps a pi-like session file in
// `--session-dir` (so `--session <id>` resumes work, across "hosts" too), and behaves as the
// prompt says. The prompt is `<behaviour>[@N] #<tag>`; `@N` means "misbehave on the first N attempts
// of this prompt, then answer normally" (attempts are counted per tag in $CHAOS_STATE_DIR).
//
//   ok:<ms>              streams text for <ms>, then completes (the default: ok:200)
//   crash                streams a little, then exits 1 in the middle of its answer
//   hang                 streams a little, then prints nothing (the idle timeout stops it)
//   flood-stderr[:<MB>]  writes <MB> (default 4) of stderr while answering, then completes
//   garbage              interleaves junk lines (not JSON, truncated, huge, binary) with its answer
//   ignore-sigint[:<ms>] ignores SIGINT and SIGTERM (only the SIGKILL stage stops it); streams for
//                        <ms> (default: forever)
//   fail:<category>      the model call fails: an assistant message with stopReason "error" and an
//                        errorMessage for that category (server_error: "500 …", rate_limited: "429 …",
//                        auth: "401 …", network: "ECONNRESET …", timeout: "… timed out")
//   escape:<ms>          runs a tool that leaves three processes running on purpose — a background
//                        job, a `setsid` child and an `env -i setsid` child (no marker, no env,
//                        its own session and group) — named `chaos-escape-<tag>` (argv[0]), waits
//                        <ms>, then completes: the worker must kill them at the attempt's end
//   escape-hang          starts the same three escapes, then goes silent mid-tool (the idle timeout
//                        ends the attempt, which must take them down with it)
//   stamp:<ms>           runs a tool for <ms> during which the agent appends the time (ms) to a file
//                        of its own every 20 ms ($CHAOS_STATE_DIR/stamps/<tag>.<pid>): the tool's
//                        lifetime as the agent saw it (the partition scenario compares them)
//   tool:<ms>            runs a bash-like tool: a `sleep` child in its own session and process group
//                        (detached: setsid) for <ms>, then completes; interrupted, it leaves the
//                        sleep behind
//
// Every assistant text starts with `[<tag>]`, so a checker can tell which prompt a turn ran.
// On SIGINT/SIGTERM it exits at once (like pi), leaving any tool grandchild running. A write to a
// closed stdout (its worker died) is ignored: it goes on until it ends, as an orphan would.
// It never lives longer than 10 minutes.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { appendFileSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const MAX_LIFETIME_MS = 10 * 60_000;
const DELTA_EVERY_MS = 40;
const CONTINUATION = /interrupted by an error before it finished/;

setTimeout(() => process.exit(3), MAX_LIFETIME_MS).unref();
process.stdout.on('error', () => undefined);
process.stderr.on('error', () => undefined);

const argv = process.argv.slice(2);
const argOf = (name) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const rpc = argOf('--mode') === 'rpc';
const sessionDir = argOf('--session-dir');
const resumeId = argOf('--session');

const usage = {
  input: 10,
  output: 5,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens: 15,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
};
const emit = (event) => {
  try {
    process.stdout.write(`${JSON.stringify(event)}\n`);
  } catch {
    // stdout gone
  }
};
const raw = (text) => {
  try {
    process.stdout.write(text);
  } catch {
    // stdout gone
  }
};
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function parse(text) {
  const tag = /#([A-Za-z0-9_.:-]+)/.exec(text)?.[1] ?? 'untagged';
  const word = text.trim().split(/\s+/)[0] ?? '';
  const match = /^([a-z-]+)(?::([A-Za-z0-9_.]+))?(?:@(\d+))?$/.exec(word);
  if (match === null) return { kind: 'ok', arg: '200', times: Infinity, tag, known: false };
  return {
    kind: match[1],
    arg: match[2],
    times: match[3] === undefined ? Infinity : Number(match[3]),
    tag,
    known: true,
  };
}

// --- the session file (pi keeps `<sessionDir>/<timestamp>_<id>.jsonl`, header first) ---------------
function sessionFile(id) {
  if (sessionDir === undefined) return null;
  try {
    const name = readdirSync(sessionDir).find((n) => n.endsWith(`_${id}.jsonl`));
    return name === undefined ? null : join(sessionDir, name);
  } catch {
    return null;
  }
}

function userTexts(file) {
  if (file === null) return [];
  try {
    return readFileSync(file, 'utf8')
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l))
      .filter((e) => e.type === 'message' && e.message?.role === 'user')
      .map((e) => e.message.content?.[0]?.text ?? '');
  } catch {
    return [];
  }
}

function appendToSession(file, message) {
  if (file === null) return;
  try {
    appendFileSync(
      file,
      `${JSON.stringify({ type: 'message', id: randomUUID().slice(0, 8), timestamp: new Date().toISOString(), message })}\n`,
    );
  } catch {
    // the session file is best effort
  }
}

/** How many attempts this tag has started, this one included. */
function attemptNumber(tag) {
  const dir = process.env.CHAOS_STATE_DIR || join(tmpdir(), 'chaos-fake-agent');
  try {
    mkdirSync(dir, { recursive: true });
    const file = join(dir, `${tag.replace(/[^A-Za-z0-9_.-]/g, '_')}.attempts`);
    appendFileSync(file, 'x');
    return statSync(file).size;
  } catch {
    return 1;
  }
}

/** A shell line leaving three processes named `chaos-escape-<tag>`: `cmd &`, `setsid cmd &`, `env -i setsid cmd &`. */
function escapes(tag) {
  const sleeper = `exec -a chaos-escape-${tag} /bin/sleep 600`;
  return `/bin/bash -c '${sleeper}' & setsid /bin/bash -c '${sleeper}' & env -i /usr/bin/setsid /bin/bash -c '${sleeper}' &`;
}

const CATEGORY_ERRORS = {
  server_error: '500 Internal Server Error (chaos fake agent)',
  rate_limited: '429 Too Many Requests: rate limit exceeded (chaos fake agent)',
  auth: '401 Unauthorized: invalid api key (chaos fake agent)',
  network: 'ECONNRESET: socket hang up (chaos fake agent)',
  timeout: 'the request timed out (chaos fake agent)',
  bad_request: '400 Bad Request (chaos fake agent)',
};

/** The attempt's session: `--session`'s, or a new one (its file written at once): known before the prompt, for get_state. */
function openSession() {
  const now = Date.now();
  if (resumeId !== undefined) return { id: resumeId, file: sessionFile(resumeId) };
  const id = randomUUID();
  if (sessionDir === undefined) return { id, file: null };
  try {
    mkdirSync(sessionDir, { recursive: true });
    const file = join(sessionDir, `${new Date(now).toISOString().replace(/[:.]/g, '-')}_${id}.jsonl`);
    writeFileSync(
      file,
      `${JSON.stringify({ type: 'session', version: 3, id, timestamp: new Date(now).toISOString(), cwd: process.cwd() })}\n`,
    );
    return { id, file };
  } catch {
    return { id, file: null };
  }
}

const { id, file } = openSession();
/** The turn was prompted and has not ended yet (rpc mode's get_state answers with it). */
let running = false;
/** stdin ended (rpc mode): exit once the turn is over. */
let stdinOver = false;

async function main(stdinText) {
  running = true;
  const now = Date.now();
  let text = stdinText;
  // A retry that resumes the session gets a continuation, not the prompt: the prompt is in the file.
  if (resumeId !== undefined && (CONTINUATION.test(text) || !parse(text).known)) {
    const earlier = userTexts(file).filter((t) => parse(t).known);
    if (earlier.length > 0) text = earlier.at(-1);
  }
  let spec = parse(text);
  const attempt = attemptNumber(spec.tag);
  if (attempt > spec.times) spec = { kind: 'ok', arg: '200', times: Infinity, tag: spec.tag, known: true };

  // rpc mode has no header line: the session id is in get_state's answer.
  if (!rpc) emit({ type: 'session', version: 3, id, timestamp: new Date(now).toISOString(), cwd: process.cwd() });
  emit({ type: 'agent_start' });
  emit({ type: 'turn_start' });
  const user = { role: 'user', content: [{ type: 'text', text: stdinText }], timestamp: now };
  emit({ type: 'message_start', message: user });
  emit({ type: 'message_end', message: user });
  appendToSession(file, user);

  const messages = [user];
  const assistant = () => ({
    role: 'assistant',
    content: [],
    api: 'openai-completions',
    provider: 'fake',
    model: 'chaos',
    usage,
    stopReason: 'stop',
    timestamp: Date.now(),
  });

  /** Streams one text message for about `ms`, at most `stopAfter` deltas (then returns without ending it). */
  async function streamText(ms, { stopAfter = Infinity, between } = {}) {
    const message = assistant();
    emit({ type: 'message_start', message });
    const block = { type: 'text', text: '' };
    message.content.push(block);
    const deltas = Math.max(1, Math.round(ms / DELTA_EVERY_MS));
    for (let i = 0; i < deltas && i < stopAfter; i++) {
      const delta = i === 0 ? `[${spec.tag}] w${i}` : ` w${i}`;
      block.text += delta;
      emit({
        type: 'message_update',
        assistantMessageEvent: { type: 'text_delta', contentIndex: 0, delta, partial: message },
        message,
      });
      if (between !== undefined) between(i);
      await sleep(DELTA_EVERY_MS);
    }
    return message;
  }

  function endMessage(message) {
    emit({ type: 'message_end', message });
    emit({ type: 'turn_end', message, toolResults: [] });
    messages.push(message);
    appendToSession(file, message);
  }

  function finish(code = 0) {
    emit({ type: 'agent_end', messages });
    running = false;
    // In rpc mode pi stays until sessiond, having seen the turn over, closes stdin.
    if (!rpc || stdinOver) setTimeout(() => process.exit(code), 10);
  }

  /** A bash tool call: `command` announced, `work` run as the tool, its result `text`, then an answer. */
  async function toolTurn(command, work) {
    const toolCallId = `call_chaos_${randomUUID().slice(0, 8)}`;
    const call = {
      ...assistant(),
      stopReason: 'toolUse',
      content: [{ type: 'toolCall', id: toolCallId, name: 'bash', arguments: { command } }],
    };
    emit({ type: 'message_start', message: call });
    endMessage(call);
    emit({ type: 'tool_execution_start', toolCallId, toolName: 'bash', args: { command } });
    const result = { content: [{ type: 'text', text: await work() }] };
    emit({ type: 'tool_execution_end', toolCallId, toolName: 'bash', result, isError: false });
    const toolResult = {
      role: 'toolResult',
      toolCallId,
      toolName: 'bash',
      content: result.content,
      isError: false,
      timestamp: Date.now(),
    };
    emit({ type: 'message_start', message: toolResult });
    emit({ type: 'message_end', message: toolResult });
    // pi records the result in its session file as the message ends: a workspace attempt waits for it there.
    messages.push(toolResult);
    appendToSession(file, toolResult);
    emit({ type: 'turn_start' });
    const message = await streamText(200);
    endMessage(message);
    finish();
  }

  switch (spec.kind) {
    case 'crash': {
      await streamText(400, { stopAfter: 5 });
      process.stderr.write('chaos fake agent: crashing on purpose (segfault simulated)\n');
      process.exit(1);
      break;
    }
    case 'hang': {
      await streamText(400, { stopAfter: 3 });
      setInterval(() => undefined, 1 << 30);
      return; // silence until stopped
    }
    case 'flood-stderr': {
      const mb = Number(spec.arg ?? '4');
      const line = `${'stderr flood '.repeat(7)}\n`;
      const total = Math.max(1, Math.round((mb * 1024 * 1024) / line.length));
      const perDelta = Math.ceil(total / 10);
      const message = await streamText(400, { between: () => process.stderr.write(line.repeat(perDelta)) });
      endMessage(message);
      finish();
      break;
    }
    case 'garbage': {
      const junk = [
        'this is not JSON at all',
        '{"type":"message_update","assistantMessageEvent":{"type":"text_delta"', // truncated
        '{"no_type_here":true}',
        '[1,2,3]',
        `{"type":"${'x'.repeat(300_000)}"}`,
        '\u0000\u0001\u0002\u00ff binary-ish \ud800',
        '   ',
        'null',
      ];
      const message = await streamText(400, { between: (i) => raw(`${junk[i % junk.length]}\n`) });
      raw(Buffer.from([0xff, 0xfe, 0xfd, 0x0a]));
      endMessage(message);
      finish();
      break;
    }
    case 'ignore-sigint': {
      process.on('SIGINT', () => undefined);
      process.on('SIGTERM', () => undefined);
      const ms = spec.arg === undefined ? Infinity : Number(spec.arg);
      const message = await streamText(Number.isFinite(ms) ? ms : 1e12);
      endMessage(message);
      finish();
      break;
    }
    case 'fail': {
      const errorMessage = CATEGORY_ERRORS[spec.arg ?? 'server_error'] ?? `${spec.arg} (chaos fake agent)`;
      const message = { ...assistant(), stopReason: 'error', errorMessage };
      emit({ type: 'message_start', message });
      endMessage(message);
      finish(0);
      break;
    }
    case 'escape': {
      const ms = Number(spec.arg ?? '300');
      const command = `${escapes(spec.tag)} sleep ${ms / 1000}`;
      await toolTurn(command, async () => {
        const child = spawn('/bin/bash', ['-c', command], { stdio: 'ignore' });
        await new Promise((resolve) => child.on('exit', resolve).on('error', resolve));
        return `started three escapes, waited ${ms} ms\n`;
      });
      break;
    }
    case 'escape-hang': {
      const command = `${escapes(spec.tag)} wait`;
      await toolTurn(command, async () => {
        spawn('/bin/bash', ['-c', command], { stdio: 'ignore' }).on('error', () => undefined);
        // Silence mid-tool, until the idle timeout stops the attempt.
        setInterval(() => undefined, 1 << 30);
        return new Promise(() => undefined);
      });
      break;
    }
    case 'stamp': {
      const ms = Number(spec.arg ?? '1000');
      const dir = join(process.env.CHAOS_STATE_DIR || join(tmpdir(), 'chaos-fake-agent'), 'stamps');
      mkdirSync(dir, { recursive: true });
      const file = join(dir, `${spec.tag.replace(/[^A-Za-z0-9_.-]/g, '_')}.${process.pid}`);
      await toolTurn(`stamp ${ms}`, async () => {
        const end = Date.now() + ms;
        while (Date.now() < end) {
          appendFileSync(file, `${Date.now()}\n`);
          await sleep(20);
        }
        appendFileSync(file, `${Date.now()}\n`);
        return `stamped ${ms} ms\n`;
      });
      break;
    }
    case 'tool': {
      const ms = Number(spec.arg ?? '1000');
      // A distinctive duration (9xx.7 s): no other test's process scan takes it for its own.
      const seconds = `${900 + Math.ceil(ms / 1000)}.7`;
      await toolTurn(`sleep ${seconds}`, async () => {
        // Like a bash tool: its own session and process group; it survives this agent unless killed.
        const child = spawn('sleep', [seconds], { detached: true, stdio: 'ignore' });
        child.on('error', () => undefined);
        child.unref();
        await sleep(ms);
        try {
          if (child.pid !== undefined) process.kill(child.pid, 'SIGKILL');
        } catch {
          // gone
        }
        return `slept ${ms} ms\n`;
      });
      break;
    }
    default: {
      const ms = Number(spec.arg ?? '200');
      const message = await streamText(Number.isFinite(ms) ? ms : 200);
      endMessage(message);
      finish();
    }
  }
}

const failed = (error) => {
  process.stderr.write(`chaos fake agent: ${error?.stack ?? error}\n`);
  process.exit(2);
};
const answer = (response) => emit({ type: 'response', ...response });

/** One rpc command: a line of stdin. */
function command(line) {
  let cmd;
  try {
    cmd = JSON.parse(line);
  } catch {
    return; // not a command: pi answers nothing either
  }
  if (cmd.type === 'get_state') {
    const data = { sessionId: id, isStreaming: running, isCompacting: false };
    answer({ id: cmd.id, command: 'get_state', success: true, data });
  } else if (cmd.type === 'prompt' && !running) {
    answer({ id: cmd.id, command: 'prompt', success: true });
    main(String(cmd.message ?? '')).catch(failed);
  } else answer({ id: cmd.id, command: cmd.type, success: false, error: 'chaos fake agent: not supported' });
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
  const over = () => {
    stdinOver = true;
    if (!running) process.exit(0);
  };
  process.stdin.on('end', over);
  process.stdin.on('error', over);
} else {
  process.stdin.on('data', (chunk) => {
    input += chunk;
  });
  process.stdin.on('end', () => {
    main(input).catch(failed);
  });
  process.stdin.on('error', () => main(input).catch(() => process.exit(2)));
}
