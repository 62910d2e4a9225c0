#!/usr/bin/env node
// A stand-in for `pi --mode json --print` in the queue benchmark's cancel runs:
// reads the prompt from stdin, prints pi 0.73-like JSON lines (session header,
// agent_start, the user message, the start of a streamed assistant message),
// then waits forever, as pi does while the model is thinking.
//   default:     SIGTERM/SIGINT end it at once (pi's own behaviour: cooperative).
//   --stubborn:  it ignores SIGINT and SIGTERM; only the SIGKILL stage stops it.
// Other arguments (pi's --mode json --print …) are ignored.
import { randomUUID } from 'node:crypto';

const stubborn = process.argv.includes('--stubborn');
if (stubborn) {
  process.on('SIGINT', () => {});
  process.on('SIGTERM', () => {});
}
setInterval(() => {}, 1 << 30);

const emit = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);
const usage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };

let prompt = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  prompt += chunk;
});
process.stdin.on('end', () => {
  const now = Date.now();
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
  for (const delta of ['Reading the session ', 'store first, ', 'then the writer…']) {
    block.text += delta;
    emit({ type: 'message_update', assistantMessageEvent: { type: 'text_delta', contentIndex: 0, delta, partial: assistant }, message: assistant });
  }
  // …and nothing more: the model "thinks" until the process is stopped.
});
