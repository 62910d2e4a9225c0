import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { GeminiMapper, type GeminiMapperOptions } from '../../../src/agents/gemini/mapper.ts';
import type { AttemptExit } from '../../../src/agents/shared/agent-mapper.ts';
import type { CliMessage, MessageOf } from '../../../src/protocol/index.ts';

export const GEMINI_FIXTURES = join(import.meta.dirname, '..', '..', 'fixtures', 'gemini');

export const CLEAN_EXIT: AttemptExit = { exitCode: 0, signal: null, stopReason: null, stderrTail: '' };

export function transcriptNames(): string[] {
  return readdirSync(GEMINI_FIXTURES)
    .filter((f) => f.endsWith('.stdout.jsonl'))
    .map((f) => f.replace('.stdout.jsonl', ''))
    .sort();
}

export function readTranscript(name: string): string[] {
  const text = readFileSync(join(GEMINI_FIXTURES, `${name}.stdout.jsonl`), 'utf8');
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines;
}

/** How the recorded process ended: `<name>.exit`, with `<name>.stderr.txt` as its stderr tail. */
export function recordedExit(name: string): AttemptExit {
  const raw = readFileSync(join(GEMINI_FIXTURES, `${name}.exit`), 'utf8').trim();
  const stderrTail = readFileSync(join(GEMINI_FIXTURES, `${name}.stderr.txt`), 'utf8');
  if (/^SIG[A-Z]+$/.test(raw)) return { exitCode: null, signal: raw, stopReason: null, stderrTail };
  return { exitCode: Number(raw), signal: null, stopReason: null, stderrTail };
}

export function mapLines(lines: readonly string[], exit: AttemptExit = CLEAN_EXIT, options: GeminiMapperOptions = {}): CliMessage[] {
  const mapper = new GeminiMapper(options);
  const out: CliMessage[] = [];
  for (const line of lines) out.push(...mapper.push(line));
  out.push(...mapper.complete(exit));
  return out;
}

export function mapRecorded(name: string, options: GeminiMapperOptions = {}, exit: Partial<AttemptExit> = {}): CliMessage[] {
  return mapLines(readTranscript(name), { ...recordedExit(name), ...exit }, options);
}

export function assistantText(messages: readonly CliMessage[]): string {
  return messages.map((m) => (m.type === 'assistant' ? m.content.text : '')).join('');
}

/** What the assistant deltas must add up to: every assistant `message` content, in order. */
export function expectedAssistantText(lines: readonly string[]): string {
  let text = '';
  for (const line of lines) {
    try {
      const event = JSON.parse(line) as { type?: string; role?: string; content?: unknown };
      if (event.type === 'message' && event.role === 'assistant' && typeof event.content === 'string') text += event.content;
    } catch {
      // not an event
    }
  }
  return text;
}

export function terminalOf(messages: readonly CliMessage[]): MessageOf<'terminal.completed'> | MessageOf<'terminal.failed'> {
  const terminals = messages.filter((m) => m.type === 'terminal.completed' || m.type === 'terminal.failed');
  if (terminals.length !== 1) throw new Error(`expected exactly one terminal message, got ${terminals.length}`);
  if (messages.at(-1) !== terminals[0]) throw new Error('the terminal message is not the last one');
  return terminals[0] as MessageOf<'terminal.completed'> | MessageOf<'terminal.failed'>;
}

export function failure(messages: readonly CliMessage[]): MessageOf<'terminal.failed'>['content'] {
  const terminal = terminalOf(messages);
  if (terminal.type !== 'terminal.failed') throw new Error(`expected terminal.failed, got ${JSON.stringify(terminal)}`);
  return terminal.content;
}
