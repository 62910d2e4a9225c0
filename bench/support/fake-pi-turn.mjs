#!/usr/bin/env node
// A stand-in for `pi --mode json --print` that completes a turn and exits, for
// the e2e and scaling benchmarks: reads the prompt from stdin to its end, then
// prints pi 0.73-like JSON lines for one whole turn (session header,
// agent_start, the user message, an assistant message streamed in
// `--messages N` − 2 text deltas, message_end, turn_end, agent_end) and exits 0.
// sessiond's PiMapper turns that into exactly N messages: session.started,
// N − 2 `assistant` deltas, terminal.completed. Other arguments (pi's
// --mode json --print …) are ignored.
import { randomUUID } from 'node:crypto';

const at = process.argv.indexOf('--messages');
const messages = at >= 0 ? Number(process.argv[at + 1]) : 20;
if (!Number.isInteger(messages) || messages < 2) {
  process.stderr.write('fake-pi-turn: --messages must be an integer ≥ 2\n');
  process.exit(2);
}

const lines = [];
const emit = (event) => lines.push(JSON.stringify(event));
const DELTAS = ['Looking at the session store, ', 'the writer batches every ', 'message of a transition ', 'into one fenced Lua call; ', 'the lease is checked first. '];

let prompt = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  prompt += chunk;
});
process.stdin.on('end', () => {
  const now = Date.now();
  const usage = { input: 1200, output: 20 * (messages - 2), cacheRead: 0, cacheWrite: 0, totalTokens: 1200 + 20 * (messages - 2), cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };
  emit({ type: 'session', version: 3, id: randomUUID(), timestamp: new Date(now).toISOString(), cwd: process.cwd() });
  emit({ type: 'agent_start' });
  emit({ type: 'turn_start' });
  const user = { role: 'user', content: [{ type: 'text', text: prompt }], timestamp: now };
  emit({ type: 'message_start', message: user });
  emit({ type: 'message_end', message: user });
  const assistant = { role: 'assistant', content: [], api: 'openai-completions', provider: 'fake', model: 'bench', usage, stopReason: 'stop', timestamp: now };
  emit({ type: 'message_start', message: assistant });
  const block = { type: 'text', text: '' };
  assistant.content.push(block);
  for (let i = 0; i < messages - 2; i += 1) {
    const delta = DELTAS[i % DELTAS.length];
    block.text += delta;
    emit({ type: 'message_update', assistantMessageEvent: { type: 'text_delta', contentIndex: 0, delta, partial: assistant }, message: assistant });
  }
  emit({ type: 'message_end', message: assistant });
  emit({ type: 'turn_end', message: assistant, toolResults: [] });
  emit({ type: 'agent_end', messages: [user, assistant] });
  process.stdout.write(`${lines.join('\n')}\n`);
});
