import { ClaudeCodeMapper, type ClaudeCodeMapperOptions } from '../../../src/agents/claude-code/mapper.ts';
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

export const CLAUDE_FIXTURES = fixtureDir('claude-code');

export { assistantText, CLEAN_EXIT, thoughtText };

export function transcriptNames(): string[] {
  return fixtureNames(CLAUDE_FIXTURES);
}

export function readTranscript(name: string): string[] {
  return fixtureLines(CLAUDE_FIXTURES, name);
}

/** How the recorded process ended, from `<name>.exit` (an exit code, or a signal name). */
export function recordedExit(name: string): AttemptExit {
  return recordedExitOf(CLAUDE_FIXTURES, name);
}

export function mapLines(
  lines: readonly string[],
  exit: AttemptExit = CLEAN_EXIT,
  options: ClaudeCodeMapperOptions = {},
): CliMessage[] {
  return mapAll(new ClaudeCodeMapper(options), lines, exit);
}

interface RawBlock {
  type?: string;
  text?: string;
  thinking?: string;
}

interface RawEvent {
  type?: string;
  parent_tool_use_id?: string | null;
  message?: { id?: string; model?: string; content?: RawBlock[] };
  event?: {
    type?: string;
    index?: number;
    message?: { id?: string };
    content_block?: RawBlock;
    delta?: { type?: string; text?: string; thinking?: string };
  };
}

function parse(line: string): RawEvent | null {
  try {
    return JSON.parse(line) as RawEvent;
  } catch {
    return null;
  }
}

/**
 * The blocks of `kind` of every assistant message, in order: as Claude Code completed them
 * (`assistant` lines), or for a block cut off before that, as far as it was streamed.
 */
function finalBlocks(lines: readonly string[], kind: 'text' | 'thinking'): string {
  const order: string[] = [];
  const completed = new Map<string, string[]>();
  const streamed = new Map<string, Map<number, string>>();
  let current = '';
  const see = (id: string): void => {
    if (!order.includes(id)) order.push(id);
  };
  let anonymous = 0;
  for (const line of lines) {
    const e = parse(line);
    if (e === null || (typeof e.parent_tool_use_id === 'string' && e.parent_tool_use_id !== '')) continue;
    if (e.type === 'stream_event' && e.event?.type === 'message_start') {
      current = e.event.message?.id ?? '';
      see(current);
      streamed.set(current, new Map());
    }
    if (e.type === 'stream_event' && e.event?.type === 'content_block_start' && e.event.content_block?.type === kind) {
      streamed.get(current)?.set(e.event.index ?? 0, '');
    }
    const delta = e.event?.delta;
    if (e.type === 'stream_event' && e.event?.type === 'content_block_delta' && delta?.type === `${kind}_delta`) {
      const blocks = streamed.get(current);
      const index = e.event.index ?? 0;
      blocks?.set(index, (blocks.get(index) ?? '') + (kind === 'text' ? (delta.text ?? '') : (delta.thinking ?? '')));
    }
    if (e.type === 'assistant' && e.message?.model !== '<synthetic>') {
      const id = e.message?.id ?? `anonymous-${anonymous++}`;
      see(id);
      const texts = (e.message?.content ?? [])
        .filter((b) => b.type === kind)
        .map((b) => (kind === 'text' ? (b.text ?? '') : (b.thinking ?? '')));
      completed.set(id, [...(completed.get(id) ?? []), ...texts]);
    }
  }
  let out = '';
  for (const id of order) {
    const done = completed.get(id) ?? [];
    const stream = [...(streamed.get(id) ?? new Map<number, string>()).entries()]
      .sort((a, b) => a[0] - b[0])
      .map(([, t]) => t);
    for (let i = 0; i < Math.max(done.length, stream.length); i++) out += done[i] ?? stream[i] ?? '';
  }
  return out;
}

/** The text the `assistant` messages must add up to. */
export function expectedAssistantText(lines: readonly string[]): string {
  return finalBlocks(lines, 'text');
}

export function expectedThinking(lines: readonly string[]): string {
  return finalBlocks(lines, 'thinking');
}

/** The same stream as without `--include-partial-messages`: only completed blocks are left to read. */
export function withoutStreamEvents(lines: readonly string[]): string[] {
  return lines.filter((line) => parse(line)?.type !== 'stream_event');
}

/** The same stream with every completed model block removed: only the stream events are left to read. */
export function withoutCompletedBlocks(lines: readonly string[]): string[] {
  return lines.filter((line) => {
    const e = parse(line);
    return e?.type !== 'assistant' || e.message?.model === '<synthetic>';
  });
}

export function hasStreamEvents(lines: readonly string[]): boolean {
  return lines.some((line) => parse(line)?.type === 'stream_event');
}
