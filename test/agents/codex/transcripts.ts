import { CodexMapper, type CodexMapperOptions } from '../../../src/agents/codex/mapper.ts';
import type { AttemptExit } from '../../../src/agents/shared/agent-mapper.ts';
import type { CliMessage } from '../../../src/index.ts';
import {
  assistantText,
  CLEAN_EXIT,
  fixtureDir,
  fixtureLines,
  fixtureNames,
  mapAll,
  recordedExitOf,
  thoughtText,
} from '../fixtures.ts';

export const CODEX_FIXTURES = fixtureDir('codex');

export { assistantText, CLEAN_EXIT, thoughtText };

export function transcriptNames(): string[] {
  return fixtureNames(CODEX_FIXTURES);
}

export function readTranscript(name: string): string[] {
  return fixtureLines(CODEX_FIXTURES, name);
}

/** How the recorded process ended (`<name>.exit`: a number or a signal name), with its recorded stderr. */
export function recordedExit(name: string): AttemptExit {
  return recordedExitOf(CODEX_FIXTURES, name);
}

export function mapLines(
  lines: readonly string[],
  exit: AttemptExit = CLEAN_EXIT,
  options: CodexMapperOptions = {},
): CliMessage[] {
  return mapAll(new CodexMapper(options), lines, exit);
}

export function mapRecorded(name: string, options: CodexMapperOptions = {}): CliMessage[] {
  return mapLines(readTranscript(name), recordedExit(name), options);
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
