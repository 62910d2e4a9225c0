import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isTerminal } from '../../../src/protocol/index.ts';
import {
  assistantText,
  expectedAssistantText,
  mapLines,
  readTranscript,
  thoughtText,
  expectedThinking,
  withoutSnapshots,
} from './transcripts.ts';
import { arbitraryGarbageLine, interleave } from '../garbage.ts';

const garbageLine = arbitraryGarbageLine();

describe('pi mapper properties', () => {
  for (const name of [
    'text',
    'text-burst',
    'thinking',
    'tool',
    'two-tools',
    'midclose',
    'rpc-text',
    'rpc-steer-tool',
  ]) {
    it(`${name}: garbage lines interleaved anywhere never throw and never change the assistant text or thinking`, () => {
      const lines = readTranscript(name);
      const text = expectedAssistantText(lines);
      const thinking = expectedThinking(lines);
      fc.assert(
        fc.property(
          fc.array(fc.tuple(fc.nat(), garbageLine), { maxLength: 20 }),
          fc.boolean(),
          (inserts, deltasOnly) => {
            const source = deltasOnly ? withoutSnapshots(lines) : lines;
            const messages = mapLines(interleave(source, inserts));
            expect(assistantText(messages)).toBe(text);
            expect(thoughtText(messages)).toBe(thinking);
            expect(messages.filter(isTerminal)).toHaveLength(1);
          },
        ),
        { numRuns: 150 },
      );
    });
  }

  it('any sequence of arbitrary lines gives exactly one terminal message and never throws', () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(garbageLine, fc.constantFrom(...readTranscript('tool'))), { maxLength: 60 }),
        (lines) => {
          const messages = mapLines(lines);
          expect(messages.filter(isTerminal)).toHaveLength(1);
          expect(isTerminal(messages.at(-1)!)).toBe(true);
        },
      ),
      { numRuns: 300 },
    );
  });
});
