#!/usr/bin/env node
// A stand-in for `pi --mode json --print` in the benchmarks: reads the prompt
// from stdin to its end, then prints pi 0.73-like JSON lines (session header,
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
// Other arguments (pi's --mode json --print …) are ignored.
import { randomUUID } from 'node:crypto';

const hang = process.argv.includes('--hang');
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

const lines = [];
const emit = (event) => lines.push(JSON.stringify(event));

let prompt = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  prompt += chunk;
});
process.stdin.on('end', () => {
  const now = Date.now();
  const output = hang ? 0 : 20 * deltas.length;
  const usage = {
    input: hang ? 0 : 1200,
    output,
    cacheRead: 0,
    cacheWrite: 0,
    totalTokens: (hang ? 0 : 1200) + output,
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
  };
  emit({ type: 'session', version: 3, id: randomUUID(), timestamp: new Date(now).toISOString(), cwd: process.cwd() });
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
      if (i === lines.length) clearInterval(timer);
    }, every);
  } else process.stdout.write(`${lines.join('\n')}\n`);
});
