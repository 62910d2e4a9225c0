import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isTerminal } from '../../../src/protocol/index.ts';
import {
  assistantText,
  expectedAssistantText,
  expectedThinking,
  hasStreamEvents,
  mapLines,
  readTranscript,
  recordedExit,
  thoughtText,
  withoutCompletedBlocks,
  withoutStreamEvents,
} from './transcripts.ts';
import { arbitraryGarbageLine, interleave } from '../garbage.ts';

const garbageLine = arbitraryGarbageLine();

const ev = (value: Record<string, unknown>): string => JSON.stringify(value);
const stream = (event: Record<string, unknown>): string => ev({ type: 'stream_event', event });

/**
 * A Claude Code run as it would print it: per message, its blocks streamed in the given chunks
 * (with partial messages) and each block completed by an `assistant` line, then a result.
 */
function synthesize(
  messages: { thinking: string[]; text: string[] }[],
  partial: boolean,
  completedAfterStop: boolean,
): string[] {
  const lines = [ev({ type: 'system', subtype: 'init', session_id: 's-prop' })];
  messages.forEach((message, m) => {
    const id = `msg_${m}`;
    if (partial) lines.push(stream({ type: 'message_start', message: { id } }));
    const blocks = [
      ...(message.thinking.length > 0 ? [{ kind: 'thinking' as const, chunks: message.thinking }] : []),
      ...(message.text.length > 0 ? [{ kind: 'text' as const, chunks: message.text }] : []),
    ];
    blocks.forEach((block, index) => {
      const whole = block.chunks.join('');
      const completed = ev({
        type: 'assistant',
        message: {
          id,
          content: [block.kind === 'text' ? { type: 'text', text: whole } : { type: 'thinking', thinking: whole }],
        },
      });
      if (partial) {
        lines.push(
          stream({
            type: 'content_block_start',
            index,
            content_block: block.kind === 'text' ? { type: 'text', text: '' } : { type: 'thinking', thinking: '' },
          }),
        );
        for (const chunk of block.chunks) {
          lines.push(
            stream({
              type: 'content_block_delta',
              index,
              delta:
                block.kind === 'text'
                  ? { type: 'text_delta', text: chunk }
                  : { type: 'thinking_delta', thinking: chunk },
            }),
          );
        }
      }
      if (!completedAfterStop) lines.push(completed);
      if (partial) lines.push(stream({ type: 'content_block_stop', index }));
      if (completedAfterStop) lines.push(completed);
    });
    if (partial)
      lines.push(
        stream({ type: 'message_delta', delta: { stop_reason: m === messages.length - 1 ? 'end_turn' : 'tool_use' } }),
      );
  });
  lines.push(
    ev({
      type: 'result',
      subtype: 'success',
      is_error: false,
      result: messages.at(-1)?.text.join('') ?? '',
      stop_reason: 'end_turn',
    }),
  );
  return lines;
}

describe('Claude Code mapper properties', () => {
  for (const name of [
    'text',
    'text-whole',
    'tool',
    'tool-whole',
    'two-tools',
    'midclose',
    'sigint-streaming',
    'sigint-long-tool',
  ]) {
    it(`${name}: garbage lines interleaved anywhere never throw and never change the assistant text or thinking`, () => {
      const lines = readTranscript(name);
      const exit = recordedExit(name);
      const variants = hasStreamEvents(lines)
        ? (['as-recorded', 'whole-blocks', 'deltas-only'] as const)
        : (['as-recorded'] as const);
      fc.assert(
        fc.property(
          fc.array(fc.tuple(fc.nat(), garbageLine), { maxLength: 20 }),
          fc.constantFrom(...variants),
          (inserts, variant) => {
            const source =
              variant === 'whole-blocks'
                ? withoutStreamEvents(lines)
                : variant === 'deltas-only'
                  ? withoutCompletedBlocks(lines)
                  : lines;
            const messages = mapLines(interleave(source, inserts), exit);
            expect(assistantText(messages)).toBe(expectedAssistantText(variant === 'whole-blocks' ? source : lines));
            expect(thoughtText(messages)).toBe(expectedThinking(variant === 'whole-blocks' ? source : lines));
            expect(messages.filter(isTerminal)).toHaveLength(1);
            expect(isTerminal(messages.at(-1)!)).toBe(true);
          },
        ),
        { numRuns: 100 },
      );
    });
  }

  it('any text split into any deltas adds up exactly, with or without partial messages, whenever the completed block comes', () => {
    const chunks = fc.array(fc.string({ unit: 'grapheme', maxLength: 6 }), { maxLength: 5 });
    fc.assert(
      fc.property(
        fc.array(fc.record({ thinking: chunks, text: chunks }), { minLength: 1, maxLength: 3 }),
        fc.boolean(),
        fc.boolean(),
        (messages, partial, late) => {
          const lines = synthesize(messages, partial, late);
          const out = mapLines(lines);
          expect(assistantText(out)).toBe(messages.map((m) => m.text.join('')).join(''));
          expect(out.filter((m) => m.type === 'assistant.thought').map((m) => m.content.text)).toEqual(
            messages.map((m) => m.thinking.join('')).filter((t) => t !== ''),
          );
          expect(out.at(-1)?.type).toBe('terminal.completed');
        },
      ),
      { numRuns: 300 },
    );
  });

  it('any sequence of arbitrary lines gives exactly one terminal message, last, and never throws', () => {
    const recorded = [...readTranscript('tool'), ...readTranscript('http500'), ...readTranscript('sigint-long-tool')];
    fc.assert(
      fc.property(fc.array(fc.oneof(garbageLine, fc.constantFrom(...recorded)), { maxLength: 60 }), (lines) => {
        const messages = mapLines(lines);
        expect(messages.filter(isTerminal)).toHaveLength(1);
        expect(isTerminal(messages.at(-1)!)).toBe(true);
      }),
      { numRuns: 300 },
    );
  });
});
