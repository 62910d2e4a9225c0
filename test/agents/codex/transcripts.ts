import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { CodexMapper, type CodexMapperOptions } from '../../../src/agents/codex/mapper.ts';
import type { AttemptExit } from '../../../src/agents/shared/agent-mapper.ts';
import type { CliMessage } from '../../../src/protocol/index.ts';

export const CODEX_FIXTURES = join(import.meta.dirname, '..', '..', 'fixtures', 'codex');

export const CLEAN_EXIT: AttemptExit = { exitCode: 0, signal: null, stopReason: null, stderrTail: '' };

export function transcriptNames(): string[] {
  return readdirSync(CODEX_FIXTURES)
    .filter((f) => f.endsWith('.stdout.jsonl'))
    .map((f) => f.replace('.stdout.jsonl', ''))
    .sort();
}

export function readTranscript(name: string): string[] {
  const text = readFileSync(join(CODEX_FIXTURES, `${name}.stdout.jsonl`), 'utf8');
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines;
}

/** How the recorded process ended (`<name>.exit`: a number or a signal name), with its recorded stderr. */
export function recordedExit(name: string): AttemptExit {
  const raw = readFileSync(join(CODEX_FIXTURES, `${name}.exit`), 'utf8').trim();
  const stderrTail = readFileSync(join(CODEX_FIXTURES, `${name}.stderr.txt`), 'utf8');
  if (/^SIG[A-Z]+$/.test(raw)) return { exitCode: null, signal: raw, stopReason: null, stderrTail };
  return { exitCode: Number(raw), signal: null, stopReason: null, stderrTail };
}

export function mapLines(lines: readonly string[], exit: AttemptExit = CLEAN_EXIT, options: CodexMapperOptions = {}): CliMessage[] {
  const mapper = new CodexMapper(options);
  const out: CliMessage[] = [];
  for (const line of lines) out.push(...mapper.push(line));
  out.push(...mapper.complete(exit));
  return out;
}

export function mapRecorded(name: string, options: CodexMapperOptions = {}): CliMessage[] {
  return mapLines(readTranscript(name), recordedExit(name), options);
}

export function assistantText(messages: readonly CliMessage[]): string {
  return messages.map((m) => (m.type === 'assistant' ? m.content.text : '')).join('');
}

export function thoughtText(messages: readonly CliMessage[]): string {
  return messages.map((m) => (m.type === 'assistant.thought' ? m.content.text : '')).join('');
}

function completedItems(lines: readonly string[], type: string): string[] {
  const out: string[] = [];
  for (const line of lines) {
    try {
      const event = JSON.parse(line) as { type?: string; item?: { type?: string; text?: string } };
      if (event.type === 'item.completed' && event.item?.type === type) out.push(event.item.text ?? '');
    } catch {
      // not JSON
    }
  }
  return out;
}

/** The text of every completed `agent_message`, in order (what the `assistant` messages must add up to). */
export function expectedAssistantText(lines: readonly string[]): string {
  return completedItems(lines, 'agent_message').join('');
}

export function expectedThinking(lines: readonly string[]): string {
  return completedItems(lines, 'reasoning').join('');
}

export function ev(event: Record<string, unknown>): string {
  return JSON.stringify(event);
}
