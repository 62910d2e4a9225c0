import { GeminiMapper, type GeminiMapperOptions } from '../../../src/agents/gemini/mapper.ts';
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

export const GEMINI_FIXTURES = fixtureDir('gemini');

export { assistantText, CLEAN_EXIT, thoughtText };

export function transcriptNames(): string[] {
  return fixtureNames(GEMINI_FIXTURES);
}

export function readTranscript(name: string): string[] {
  return fixtureLines(GEMINI_FIXTURES, name);
}

/** How the recorded process ended: `<name>.exit`, with `<name>.stderr.txt` as its stderr tail. */
export function recordedExit(name: string): AttemptExit {
  return recordedExitOf(GEMINI_FIXTURES, name);
}

export function mapLines(
  lines: readonly string[],
  exit: AttemptExit = CLEAN_EXIT,
  options: GeminiMapperOptions = {},
): CliMessage[] {
  return mapAll(new GeminiMapper(options), lines, exit);
}

export function mapRecorded(
  name: string,
  options: GeminiMapperOptions = {},
  exit: Partial<AttemptExit> = {},
): CliMessage[] {
  return mapLines(readTranscript(name), { ...recordedExit(name), ...exit }, options);
}

/** What the assistant deltas must add up to: every assistant `message` content, in order. */
export function expectedAssistantText(lines: readonly string[]): string {
  let text = '';
  for (const line of lines) {
    try {
      const event = JSON.parse(line) as { type?: string; role?: string; content?: unknown };
      if (event.type === 'message' && event.role === 'assistant' && typeof event.content === 'string')
        text += event.content;
    } catch {
      // not an event
    }
  }
  return text;
}
