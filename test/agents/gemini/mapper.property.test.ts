import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isTerminal } from '../../../src/protocol/index.ts';
import { assistantText, expectedAssistantText, mapLines, readTranscript, recordedExit } from './transcripts.ts';
import { arbitraryGarbageLine } from '../garbage.ts';

const garbageLine = arbitraryGarbageLine(['    at Turn.run (file:///x.js:1:1)']);

/** Events of unknown types and malformed known ones: valid JSON with a string type, which must not disturb the text either. */
const strayEvent = fc.oneof(
  fc
    .record({ type: fc.constantFrom('unknown_event', 'usage', 'tool_update'), x: fc.anything() })
    .map((e) => JSON.stringify(e)),
  fc.constantFrom(
    '{"type":"message","role":"user","content":"hi"}',
    '{"type":"message","role":"assistant","content":17,"delta":true}',
    '{"type":"tool_use"}',
    '{"type":"tool_result","status":"success"}',
    '{"type":"error","severity":"warning","message":"careful"}',
    '{"type":"init"}',
  ),
);

/** Inserts each line at its position (positions are taken modulo the growing length), never after the result. */
function interleave(lines: readonly string[], inserts: ReadonlyArray<[number, string]>): string[] {
  const out = [...lines];
  for (const [at, line] of inserts) {
    const resultAt = out.findIndex((l) => l.includes('"type":"result"'));
    const limit = resultAt === -1 ? out.length + 1 : resultAt + 1;
    out.splice(at % limit, 0, line);
  }
  return out;
}

describe('gemini mapper properties', () => {
  for (const name of ['text', 'tool', 'two-tools', 'tool-default-mode', 'midclose', 'sigterm-during-tool', 'http500']) {
    it(`${name}: garbage lines and stray events interleaved anywhere never throw and never change the assistant text or the terminal`, () => {
      const lines = readTranscript(name);
      const text = expectedAssistantText(lines);
      const exit = recordedExit(name);
      const expectedTerminal = mapLines(lines, exit).at(-1)!;
      fc.assert(
        fc.property(fc.array(fc.tuple(fc.nat(), fc.oneof(garbageLine, strayEvent)), { maxLength: 20 }), (inserts) => {
          const messages = mapLines(interleave(lines, inserts), exit);
          expect(assistantText(messages)).toBe(text);
          const terminals = messages.filter(isTerminal);
          expect(terminals).toHaveLength(1);
          expect(terminals[0]?.type).toBe(expectedTerminal.type);
          if (terminals[0]?.type === 'terminal.failed' && expectedTerminal.type === 'terminal.failed') {
            expect(terminals[0].content.category).toBe(expectedTerminal.content.category);
          }
        }),
        { numRuns: 150 },
      );
    });
  }

  it('any sequence of arbitrary lines and recorded events gives exactly one terminal message, last, and never throws', () => {
    const recorded = [...readTranscript('tool'), ...readTranscript('http500'), ...readTranscript('empty-response')];
    fc.assert(
      fc.property(
        fc.array(fc.oneof(garbageLine, strayEvent, fc.constantFrom(...recorded)), { maxLength: 60 }),
        fc.record({
          exitCode: fc.option(fc.integer({ min: 0, max: 255 })),
          signal: fc.option(fc.constantFrom('SIGTERM', 'SIGKILL')),
        }),
        fc.constantFrom(null, 'requested', 'idle_timeout', 'exit_grace'),
        fc.string(),
        (lines, { exitCode, signal }, stopReason, stderrTail) => {
          const messages = mapLines(lines, {
            exitCode,
            signal,
            stopReason: stopReason as 'requested' | 'idle_timeout' | 'exit_grace' | null,
            stderrTail,
          });
          expect(messages.filter(isTerminal)).toHaveLength(1);
          expect(isTerminal(messages.at(-1)!)).toBe(true);
        },
      ),
      { numRuns: 300 },
    );
  });
});
