import { Random } from './random.ts';

/**
 * Generates a deterministic, realistic stdout transcript of `pi --mode json`
 * (pi 0.73), shaped like the recordings in /work/shared/fixtures/pi-transcripts
 * and test/fixtures/pi: one run (`session`, `agent_start`, turns, `agent_end`)
 * whose turns are long assistant messages streamed in ~20-char deltas, some
 * with a thinking block, each (but the last) ending in one or two tool calls
 * with their `tool_execution_*` events. Every `message_update` line carries the
 * cumulative message twice (`assistantMessageEvent.partial` and `message`), so
 * a message of N chars costs about N²/20 bytes: that is what makes it large.
 */
export interface PiTranscriptOptions {
  seed: number;
  /** Tool turns are added until the transcript holds at least this many bytes; one closing turn follows. */
  minBytes: number;
}

export interface PiTranscript {
  bytes: Buffer;
  lines: number;
  turns: number;
  /** Every assistant text block, concatenated in order: what the mapper's `assistant` deltas must add up to. */
  text: string;
  /** The thinking of each assistant message that has some, in order. */
  thoughts: string[];
  toolCalls: number;
  failedToolCalls: number;
  longestMessageChars: number;
}

const MODEL = 'fake-long';
const ZERO_USAGE = {
  input: 0,
  output: 0,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens: 0,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
};

type Json = Record<string, unknown>;
type ArgPairs = Array<[string, string]>;

interface ToolPlan {
  id: string;
  name: string;
  args: ArgPairs;
  output: string;
  isError: boolean;
}

interface MessagePlan {
  thinking: string;
  text: string;
  tools: ToolPlan[];
}

export function generatePiTranscript(options: PiTranscriptOptions): PiTranscript {
  const rng = new Random(options.seed);
  const out = new LineSink();
  const expected = { text: [] as string[], thoughts: [] as string[], toolCalls: 0, failedToolCalls: 0, longest: 0 };
  let clock = 1_795_982_574_000;
  const tick = (ms: number): number => (clock += ms);
  let callNumber = 0;

  out.emit({
    type: 'session',
    version: 3,
    id: `01a2${rng.hex(4)}-${rng.hex(4)}-7${rng.hex(3)}-${rng.pick(['8', '9', 'a', 'b'])}${rng.hex(3)}-${rng.hex(12)}`,
    timestamp: new Date(clock).toISOString(),
    cwd: '/home/dev/pi-demo/work',
  });
  out.emit({ type: 'agent_start' });
  out.emit({ type: 'turn_start' });
  const user = {
    role: 'user',
    content: [{ type: 'text', text: 'Refactor the session store, explain every change in detail, and run the tests.' }],
    timestamp: tick(15),
  };
  out.emit({ type: 'message_start', message: user });
  out.emit({ type: 'message_end', message: user });
  const conversation: Json[] = [user];

  let turns = 0;
  for (let final = false; !final;) {
    final = out.bytes >= options.minBytes;
    if (turns > 0) out.emit({ type: 'turn_start' });
    turns += 1;
    const plan = final ? closingMessage(rng) : toolMessage(rng, () => `call_fake_${(callNumber += 1)}`);
    const message = streamAssistant(out, rng, plan, tick(60), `chatcmpl-fake-${turns}`);
    conversation.push(message);
    if (plan.text !== '') expected.text.push(plan.text);
    if (plan.thinking !== '') expected.thoughts.push(plan.thinking);
    expected.longest = Math.max(expected.longest, plan.thinking.length + plan.text.length);
    const results = runTools(out, rng, plan.tools, tick);
    expected.toolCalls += plan.tools.length;
    expected.failedToolCalls += plan.tools.filter((t) => t.isError).length;
    conversation.push(...results);
    out.emit({ type: 'turn_end', message, toolResults: results });
  }
  out.emit({ type: 'agent_end', messages: conversation });

  return {
    bytes: out.buffer(),
    lines: out.lines,
    turns,
    text: expected.text.join(''),
    thoughts: expected.thoughts,
    toolCalls: expected.toolCalls,
    failedToolCalls: expected.failedToolCalls,
    longestMessageChars: expected.longest,
  };
}

/** Collects lines as UTF-8 bytes (so the strings can go), counting them. */
class LineSink {
  #chunks: Buffer[] = [];
  bytes = 0;
  lines = 0;

  emit(event: Json): void {
    const chunk = Buffer.from(`${JSON.stringify(event)}\n`, 'utf8');
    this.#chunks.push(chunk);
    this.bytes += chunk.length;
    this.lines += 1;
  }

  buffer(): Buffer {
    const all = Buffer.concat(this.#chunks, this.bytes);
    this.#chunks = [];
    return all;
  }
}

// ---------------------------------------------------------------- messages

function toolMessage(rng: Random, nextId: () => string): MessagePlan {
  const r = rng.next();
  const textChars = r < 0.7 ? rng.logInt(2_000, 20_000) : r < 0.9 ? rng.int(40, 300) : 0;
  const thinking = rng.chance(0.4) ? prose(rng, rng.logInt(200, 4_000), false) : '';
  const tools = Array.from({ length: rng.chance(0.25) ? 2 : 1 }, () => toolCall(rng, nextId()));
  return { thinking, text: textChars === 0 ? '' : prose(rng, textChars, true), tools };
}

function closingMessage(rng: Random): MessagePlan {
  const thinking = rng.chance(0.4) ? prose(rng, rng.logInt(200, 2_000), false) : '';
  return { thinking, text: prose(rng, rng.int(200, 1_500), true), tools: [] };
}

/** Streams one assistant message the way pi prints it; returns its final form. */
function streamAssistant(out: LineSink, rng: Random, plan: MessagePlan, timestamp: number, responseId: string): Json {
  out.emit({
    type: 'message_start',
    message: {
      role: 'assistant',
      content: [],
      api: 'openai-completions',
      provider: 'fake',
      model: MODEL,
      usage: ZERO_USAGE,
      stopReason: 'stop',
      timestamp,
    },
  });
  // `content` is mutated in place between lines: each line is serialized as it is emitted.
  const content: Json[] = [];
  const snapshot: Json = {
    role: 'assistant',
    content,
    api: 'openai-completions',
    provider: 'fake',
    model: MODEL,
    usage: ZERO_USAGE,
    stopReason: 'stop',
    timestamp,
    responseId,
  };
  const update = (event: Json): void => {
    out.emit({ type: 'message_update', assistantMessageEvent: { ...event, partial: snapshot }, message: snapshot });
  };

  const streamText = (kind: 'thinking' | 'text', full: string): void => {
    const contentIndex = content.length;
    const field = kind === 'thinking' ? 'thinking' : 'text';
    const pieces = chunks(rng, full, 8, 32);
    // pi's snapshot runs ahead: the `_start` event already holds the first delta.
    const block: Json =
      kind === 'thinking'
        ? { type: 'thinking', thinking: pieces[0] ?? '', thinkingSignature: 'reasoning_content' }
        : { type: 'text', text: pieces[0] ?? '' };
    content.push(block);
    update({ type: `${kind}_start`, contentIndex });
    let sofar = '';
    for (const delta of pieces) {
      sofar += delta;
      block[field] = sofar;
      update({ type: `${kind}_delta`, contentIndex, delta });
    }
  };

  if (plan.thinking !== '') streamText('thinking', plan.thinking);
  if (plan.text !== '') streamText('text', plan.text);
  plan.tools.forEach((tool, streamIndex) => {
    const contentIndex = content.length;
    const serialized = JSON.stringify(Object.fromEntries(tool.args));
    const block: Json = { type: 'toolCall', id: tool.id, name: tool.name, arguments: {}, partialArgs: '', streamIndex };
    content.push(block);
    update({ type: 'toolcall_start', contentIndex });
    update({ type: 'toolcall_delta', contentIndex, delta: '' });
    let sofar = '';
    for (const delta of chunks(rng, serialized, 8, 32)) {
      sofar += delta;
      block.partialArgs = sofar;
      block.arguments = partialArguments(tool.args, sofar.length);
      update({ type: 'toolcall_delta', contentIndex, delta });
    }
  });

  // The end events come last, with the final usage and stop reason, in block order.
  const output = Math.ceil((plan.thinking.length + plan.text.length) / 4) + 20;
  const input = rng.int(2_000, 60_000);
  snapshot.usage = {
    input,
    output,
    cacheRead: 0,
    cacheWrite: 0,
    totalTokens: input + output,
    cost: {
      input: input * 3e-6,
      output: output * 15e-6,
      cacheRead: 0,
      cacheWrite: 0,
      total: input * 3e-6 + output * 15e-6,
    },
  };
  snapshot.stopReason = plan.tools.length > 0 ? 'toolUse' : 'stop';
  plan.tools.forEach((tool, i) => {
    content[content.length - plan.tools.length + i] = {
      type: 'toolCall',
      id: tool.id,
      name: tool.name,
      arguments: Object.fromEntries(tool.args),
    };
  });
  content.forEach((block, contentIndex) => {
    if (block.type === 'thinking') update({ type: 'thinking_end', contentIndex, content: block.thinking });
    else if (block.type === 'text') update({ type: 'text_end', contentIndex, content: block.text });
    else update({ type: 'toolcall_end', contentIndex, toolCall: block });
  });
  out.emit({ type: 'message_end', message: snapshot });
  return snapshot;
}

/** The `arguments` pi shows while the JSON streams: keys whose string value has begun, values cut where the stream is. */
function partialArguments(args: ArgPairs, length: number): Json {
  const out: Json = {};
  let pos = 1; // after '{'
  for (const [key, value] of args) {
    const valueOpen = pos + JSON.stringify(key).length + 1; // the value's opening quote
    const valueJson = JSON.stringify(value);
    const valueClose = valueOpen + valueJson.length - 1;
    if (length <= valueOpen) break;
    let raw = valueJson.slice(1, Math.min(length, valueClose) - valueOpen);
    raw = raw.replace(/\\u[0-9a-fA-F]{0,3}$/, '');
    if (/(?:^|[^\\])(?:\\\\)*\\$/.test(raw)) raw = raw.slice(0, -1);
    out[key] = JSON.parse(`"${raw}"`) as string;
    if (length <= valueClose) break;
    pos = valueClose + 2; // past the closing quote and the comma
  }
  return out;
}

// ---------------------------------------------------------------- tools

function toolCall(rng: Random, id: string): ToolPlan {
  const path = `src/${rng.pick(DIRS)}/${rng.pick(NOUNS)}-${rng.pick(NOUNS)}.ts`;
  const isError = rng.chance(0.08);
  const r = rng.next();
  if (r < 0.4) {
    const command = rng.pick([
      `npx vitest run test/${rng.pick(NOUNS)}`,
      `grep -rn "${rng.pick(IDENTS)}" src`,
      `ls -la src/${rng.pick(DIRS)}`,
      'npx tsc --noEmit -p tsconfig.json',
      `git diff --stat -- ${path}`,
    ]);
    const output = lines(rng, rng.logInt(50, 3_000), () => `${path}:${rng.int(1, 400)}: ${sentence(rng)}`);
    return {
      id,
      name: 'bash',
      args: [['command', command]],
      output: isError ? `${output}\n\nCommand exited with code 1` : output,
      isError,
    };
  }
  if (r < 0.65) return { id, name: 'read', args: [['path', path]], output: code(rng, rng.logInt(300, 4_000)), isError };
  if (r < 0.85) {
    return {
      id,
      name: 'edit',
      args: [
        ['path', path],
        ['oldText', code(rng, rng.int(50, 400))],
        ['newText', code(rng, rng.int(50, 600))],
      ],
      output: `Successfully replaced text in ${path}.`,
      isError,
    };
  }
  const content = code(rng, rng.logInt(500, 4_000));
  return {
    id,
    name: 'write',
    args: [
      ['path', path],
      ['content', content],
    ],
    output: `Successfully wrote ${content.length} bytes to ${path}`,
    isError,
  };
}

/** Runs the tools as pi reports it: all starts, progress, ends, then one toolResult message each. */
function runTools(out: LineSink, rng: Random, tools: ToolPlan[], tick: (ms: number) => number): Json[] {
  for (const tool of tools)
    out.emit({
      type: 'tool_execution_start',
      toolCallId: tool.id,
      toolName: tool.name,
      args: Object.fromEntries(tool.args),
    });
  for (const tool of tools) {
    const args = Object.fromEntries(tool.args);
    out.emit({
      type: 'tool_execution_update',
      toolCallId: tool.id,
      toolName: tool.name,
      args,
      partialResult: { content: [] },
    });
    const steps = rng.int(1, 3);
    for (let step = 1; step <= steps; step += 1) {
      const partial = tool.output.slice(0, Math.ceil((tool.output.length * step) / steps));
      out.emit({
        type: 'tool_execution_update',
        toolCallId: tool.id,
        toolName: tool.name,
        args,
        partialResult: { content: [{ type: 'text', text: partial }], details: {} },
      });
    }
  }
  for (const tool of tools) {
    out.emit({
      type: 'tool_execution_end',
      toolCallId: tool.id,
      toolName: tool.name,
      result: { content: [{ type: 'text', text: tool.output }], details: {} },
      isError: tool.isError,
    });
  }
  return tools.map((tool) => {
    const message = {
      role: 'toolResult',
      toolCallId: tool.id,
      toolName: tool.name,
      content: [{ type: 'text', text: tool.output }],
      isError: tool.isError,
      timestamp: tick(rng.int(5, 900)),
    };
    out.emit({ type: 'message_start', message });
    out.emit({ type: 'message_end', message });
    return message;
  });
}

// ---------------------------------------------------------------- text

const WORDS = (
  'the a an of to in for on with by from and or but not this that each every when while if then because so ' +
  'mapper session message line event delta snapshot stream buffer queue worker retry policy state machine actor store ' +
  'returns keeps emits parses splits holds replays resumes stops reports releases checks writes reads sends waits ' +
  'new old whole partial final cumulative durable bounded stale empty invalid terminal pending current previous ' +
  'text thinking tool call result error timeout signal process agent turn run attempt key value field type schema ' +
  'is are was be can must should will only once twice again already still just never always here there now'
).split(' ');
const RARE = ['naïve', 'café', '—', '→', 'résumé', '“quoted”', 'façade', '…', 'über', '≥'];
const NOUNS = [
  'session',
  'store',
  'mapper',
  'queue',
  'worker',
  'retry',
  'policy',
  'event',
  'stream',
  'buffer',
  'config',
  'timer',
  'agent',
  'tool',
];
const DIRS = ['agents/pi', 'agents/shared', 'process', 'protocol', 'retry', 'config', 'store'];
const IDENTS = [
  'pushLine',
  'applySnapshot',
  'TextDeltas',
  'runAttempt',
  'stopProcess',
  'classifyErrorText',
  'nextDelay',
  'sessionKey',
];

function word(rng: Random): string {
  const r = rng.next();
  if (r < 0.006) return rng.pick(RARE);
  if (r < 0.04) return `\`${rng.pick(IDENTS)}()\``;
  return rng.pick(WORDS);
}

function sentence(rng: Random): string {
  const words = Array.from({ length: rng.int(5, 18) }, () => word(rng));
  const first = words[0] ?? 'the';
  words[0] = first.charAt(0).toUpperCase() + first.slice(1);
  return `${words.join(' ')}${rng.pick(['.', '.', '.', ',', ':', '?'])}`;
}

function paragraph(rng: Random): string {
  return Array.from({ length: rng.int(2, 6) }, () => sentence(rng)).join(' ');
}

function lines(rng: Random, chars: number, make: () => string): string {
  const out: string[] = [];
  for (let n = 0; n < chars;) {
    const line = make();
    out.push(line);
    n += line.length + 1;
  }
  return out.join('\n').slice(0, chars);
}

const CODE_LINES = [
  (rng: Random) => `const ${rng.pick(IDENTS)} = await ${rng.pick(NOUNS)}.${rng.pick(IDENTS)}("${rng.pick(WORDS)}");`,
  (rng: Random) => `if (line.trim() === '') return { ok: 'blank' }; // ${sentence(rng)}`,
  (rng: Random) => `  throw new Error(\`cannot ${rng.pick(WORDS)} "\${key}": \${String(error)}\`);`,
  (rng: Random) => `const re = /^\\s*(\\d{3})\\b/; // "${rng.pick(WORDS)}" \\ ${rng.pick(WORDS)}`,
  (rng: Random) =>
    `\tfor (const ${rng.pick(NOUNS)} of ${rng.pick(NOUNS)}s) out.push(${rng.pick(IDENTS)}(${rng.pick(NOUNS)}));`,
  (rng: Random) => `export function ${rng.pick(IDENTS)}(${rng.pick(NOUNS)}: string): number {`,
  () => '}',
];

function code(rng: Random, chars: number): string {
  return lines(rng, chars, () => rng.pick(CODE_LINES)(rng));
}

/** Markdown-ish prose of exactly `chars` characters: paragraphs, lists and (when `rich`) code blocks. */
function prose(rng: Random, chars: number, rich: boolean): string {
  const parts: string[] = [];
  for (let n = 0; n < chars;) {
    const r = rng.next();
    let part: string;
    if (rich && r < 0.12) part = `\`\`\`ts\n${code(rng, rng.int(120, 900))}\n\`\`\``;
    else if (rich && r < 0.25) part = Array.from({ length: rng.int(2, 6) }, () => `- ${sentence(rng)}`).join('\n');
    else if (rich && r < 0.3) part = `## ${sentence(rng)}`;
    else part = paragraph(rng);
    parts.push(part);
    n += part.length + 2;
  }
  return parts.join('\n\n').slice(0, chars);
}

/** `text` cut into pieces of `min`..`max` chars (BMP-only text, so no surrogate pair is split). */
function chunks(rng: Random, text: string, min: number, max: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length;) {
    const n = rng.int(min, max);
    out.push(text.slice(i, i + n));
    i += n;
  }
  return out;
}
