import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PiMapper, type PiMapperOptions } from '../../../src/agents/pi/mapper.ts';
import type { AttemptExit } from '../../../src/agents/shared/agent-mapper.ts';
import type { CliMessage } from '../../../src/index.ts';
import { assistantText, CLEAN_EXIT, fixtureDir, fixtureLines, fixtureNames, mapAll, thoughtText } from '../fixtures.ts';

export const PI_FIXTURES = fixtureDir('pi');

export { assistantText, CLEAN_EXIT, thoughtText };

export function transcriptNames(): string[] {
  return fixtureNames(PI_FIXTURES);
}

export function readTranscript(name: string): string[] {
  return fixtureLines(PI_FIXTURES, name);
}

/** How the recorded process ended, from `<name>.exit` (a number, or a signal name). */
export function recordedExit(name: string): AttemptExit {
  let raw = '0';
  try {
    raw = readFileSync(join(PI_FIXTURES, `${name}.exit`), 'utf8').trim();
  } catch {
    // no exit file: a clean exit
  }
  if (/^SIG[A-Z]+$/.test(raw)) return { exitCode: null, signal: raw, stopReason: null, stderrTail: '' };
  const code = Number(raw);
  if (code > 128 && code < 160)
    return {
      exitCode: null,
      signal: code === 130 ? 'SIGINT' : code === 143 ? 'SIGTERM' : `SIG${code - 128}`,
      stopReason: null,
      stderrTail: '',
    };
  return { exitCode: code, signal: null, stopReason: null, stderrTail: '' };
}

export function mapLines(
  lines: readonly string[],
  exit: AttemptExit = CLEAN_EXIT,
  options: PiMapperOptions = {},
): CliMessage[] {
  return mapAll(new PiMapper(options), lines, exit);
}

interface PiBlock {
  type: string;
  text?: string;
  thinking?: string;
}

/**
 * The content of every assistant message as pi ended it: its `message_end`, or for a
 * message cut off by a kill, its last streamed snapshot.
 */
function finalAssistantMessages(lines: readonly string[]): PiBlock[][] {
  const out: PiBlock[][] = [];
  let open: PiBlock[] | null = null;
  for (const line of lines) {
    let event: {
      type?: string;
      message?: { role?: string; content?: PiBlock[] };
      assistantMessageEvent?: { partial?: { content?: PiBlock[] } };
    };
    try {
      event = JSON.parse(line) as typeof event;
    } catch {
      continue;
    }
    if (event.type === 'message_start' && event.message?.role === 'assistant') open = event.message.content ?? [];
    if (event.type === 'message_update')
      open = event.message?.content ?? event.assistantMessageEvent?.partial?.content ?? open;
    if (event.type === 'message_end' && event.message?.role === 'assistant') {
      out.push(event.message.content ?? []);
      open = null;
    }
  }
  if (open !== null) out.push(open);
  return out;
}

/** The text of the assistant messages pi ended with, in order (what `assistant` deltas must add up to). */
export function expectedAssistantText(lines: readonly string[]): string {
  return finalAssistantMessages(lines)
    .map((blocks) =>
      blocks
        .filter((b) => b.type === 'text')
        .map((b) => b.text ?? '')
        .join(''),
    )
    .join('');
}

export function expectedThinking(lines: readonly string[]): string {
  return finalAssistantMessages(lines)
    .map((blocks) =>
      blocks
        .filter((b) => b.type === 'thinking')
        .map((b) => b.thinking ?? '')
        .join(''),
    )
    .join('');
}

/** The same stream with the cumulative snapshots removed: only deltas are left to read. */
export function withoutSnapshots(lines: readonly string[]): string[] {
  return lines.map((line) => {
    const event = JSON.parse(line) as {
      type?: string;
      message?: unknown;
      assistantMessageEvent?: { partial?: unknown };
    };
    if (event.type !== 'message_update') return line;
    delete event.message;
    if (event.assistantMessageEvent) delete event.assistantMessageEvent.partial;
    return JSON.stringify(event);
  });
}

/** The same stream with the deltas removed: only the cumulative snapshots are left to read. */
export function withoutDeltas(lines: readonly string[]): string[] {
  return lines.map((line) => {
    const event = JSON.parse(line) as { type?: string; assistantMessageEvent?: { delta?: unknown } };
    if (event.type !== 'message_update' || !event.assistantMessageEvent) return line;
    delete event.assistantMessageEvent.delta;
    return JSON.stringify(event);
  });
}
