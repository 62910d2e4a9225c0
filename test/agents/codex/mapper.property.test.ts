import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isTerminal } from '../../../src/protocol/index.ts';
import {
  assistantText,
  expectedAssistantText,
  expectedThinking,
  mapLines,
  readTranscript,
  recordedExit,
  thoughtText,
  transcriptNames,
} from './transcripts.ts';
import { arbitraryGarbageLine, interleave } from '../garbage.ts';

const garbageLine = arbitraryGarbageLine(['Reading additional input from stdin...']);

describe('codex mapper properties', () => {
  for (const name of [
    'text',
    'tool',
    'two-tools',
    'text-tool-text',
    'tool-fail',
    'response-failed',
    'http500-agent-retries',
    'sigint-during-tool',
  ]) {
    it(`${name}: garbage lines interleaved anywhere never throw and never change the text, the thinking or the terminal type`, () => {
      const lines = readTranscript(name);
      const exit = recordedExit(name);
      const text = expectedAssistantText(lines);
      const thinking = expectedThinking(lines);
      const terminalType = mapLines(lines, exit).at(-1)?.type;
      fc.assert(
        fc.property(fc.array(fc.tuple(fc.nat(), garbageLine), { maxLength: 20 }), (inserts) => {
          const messages = mapLines(interleave(lines, inserts), exit);
          expect(assistantText(messages)).toBe(text);
          expect(thoughtText(messages)).toBe(thinking);
          expect(messages.filter(isTerminal)).toHaveLength(1);
          expect(messages.at(-1)?.type).toBe(terminalType);
        }),
        { numRuns: 150 },
      );
    });
  }

  it('any sequence of arbitrary lines and recorded events, with any exit, gives exactly one terminal message, last, and never throws', () => {
    const recorded = transcriptNames().flatMap((name) => readTranscript(name));
    const exit = fc.record({
      exitCode: fc.option(fc.integer({ min: 0, max: 255 }), { nil: null }),
      signal: fc.option(fc.constantFrom('SIGINT', 'SIGTERM', 'SIGKILL'), { nil: null }),
      stopReason: fc.constantFrom(null, 'requested', 'idle_timeout', 'exit_grace'),
      stderrTail: fc.string(),
    });
    fc.assert(
      fc.property(
        fc.array(fc.oneof(garbageLine, fc.constantFrom(...recorded)), { maxLength: 60 }),
        exit,
        (lines, end) => {
          const messages = mapLines(lines, end);
          expect(messages.filter(isTerminal)).toHaveLength(1);
          expect(isTerminal(messages.at(-1)!)).toBe(true);
        },
      ),
      { numRuns: 300 },
    );
  });
});
