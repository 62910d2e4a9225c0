import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { AgentMapper, AttemptExit } from '../../src/agents/shared/agent-mapper.ts';
import type { CliMessage } from '../../src/index.ts';

/** What every agent's recorded transcripts share: where they are, how they are read and mapped. */

export const CLEAN_EXIT: AttemptExit = { exitCode: 0, signal: null, stopReason: null, stderrTail: '' };

/** test/fixtures/<agent>. */
export function fixtureDir(agent: string): string {
  return join(import.meta.dirname, '..', 'fixtures', agent);
}

/** The recorded transcripts of a fixture dir (`<name>.stdout.jsonl`), by name, sorted. */
export function fixtureNames(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.stdout.jsonl'))
    .map((f) => f.replace('.stdout.jsonl', ''))
    .sort();
}

/** The stdout lines of a recorded transcript (no empty last line). */
export function fixtureLines(dir: string, name: string): string[] {
  const lines = readFileSync(join(dir, `${name}.stdout.jsonl`), 'utf8').split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines;
}

/** Every line through `mapper`, then `complete(exit)`: all the messages of one attempt. */
export function mapAll(mapper: AgentMapper, lines: readonly string[], exit: AttemptExit): CliMessage[] {
  const out: CliMessage[] = [];
  for (const line of lines) out.push(...mapper.push(line));
  out.push(...mapper.complete(exit));
  return out;
}

export function assistantText(messages: readonly CliMessage[]): string {
  return messages.map((m) => (m.type === 'assistant' ? m.content.text : '')).join('');
}

export function thoughtText(messages: readonly CliMessage[]): string {
  return messages.map((m) => (m.type === 'assistant.thought' ? m.content.text : '')).join('');
}

/** How a recorded process ended: `<name>.exit` (an exit code or a signal name), with `<name>.stderr.txt` as its stderr tail. */
export function recordedExitOf(dir: string, name: string): AttemptExit {
  const raw = readFileSync(join(dir, `${name}.exit`), 'utf8').trim();
  const stderrTail = readFileSync(join(dir, `${name}.stderr.txt`), 'utf8');
  if (/^SIG[A-Z]+$/.test(raw)) return { exitCode: null, signal: raw, stopReason: null, stderrTail };
  return { exitCode: Number(raw), signal: null, stopReason: null, stderrTail };
}
