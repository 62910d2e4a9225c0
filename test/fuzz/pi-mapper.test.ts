import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isTerminal } from '../../src/protocol/index.ts';
import { interleave } from '../agents/garbage.ts';
import { mapLines } from '../agents/pi/transcripts.ts';

interface PlannedMessage {
  thinking: string[];
  text: string[];
  tools: string[];
  stop: 'stop' | 'toolUse' | 'error';
}

const chunk = fc.string({
  minLength: 1,
  maxLength: 12,
  unit: fc.constantFrom('a', 'b', ' ', 'é', '\n', '"', '\\', '\u2028', '😀'),
});
const message: fc.Arbitrary<PlannedMessage> = fc.record({
  thinking: fc.array(chunk, { maxLength: 3 }),
  text: fc.array(chunk, { maxLength: 6 }),
  tools: fc.array(fc.constantFrom('bash', 'read', 'edit'), { maxLength: 2 }),
  stop: fc.constantFrom('stop', 'toolUse', 'error'),
});

/** A valid pi 0.73 event stream for these messages: deltas with cumulative snapshots, tool events, closing events. */
function stream(
  plan: PlannedMessage[],
  snapshots: boolean,
): { lines: string[]; text: string; thinking: string; toolIds: string[] } {
  const lines: string[] = [
    JSON.stringify({ type: 'session', id: 'fuzz-session' }),
    JSON.stringify({ type: 'agent_start' }),
  ];
  let text = '';
  let thinking = '';
  const toolIds: string[] = [];
  plan.forEach((m, mi) => {
    lines.push(JSON.stringify({ type: 'turn_start' }));
    const content: Array<Record<string, unknown>> = [];
    const snap = () => ({ role: 'assistant', content: structuredClone(content), stopReason: m.stop });
    lines.push(JSON.stringify({ type: 'message_start', message: snap() }));
    const emit = (kind: string, index: number, delta: string) => {
      const event: Record<string, unknown> = {
        type: 'message_update',
        assistantMessageEvent: { type: kind, contentIndex: index, delta, ...(snapshots ? { partial: snap() } : {}) },
      };
      if (snapshots) event.message = snap();
      lines.push(JSON.stringify(event));
    };
    if (m.thinking.length > 0) {
      const index = content.push({ type: 'thinking', thinking: '' }) - 1;
      for (const part of m.thinking) {
        (content[index] as { thinking: string }).thinking += part;
        emit('thinking_delta', index, part);
      }
      thinking += m.thinking.join('');
    }
    if (m.text.length > 0) {
      const index = content.push({ type: 'text', text: '' }) - 1;
      for (const part of m.text) {
        (content[index] as { text: string }).text += part;
        emit('text_delta', index, part);
      }
    }
    const tools = m.stop === 'toolUse' ? m.tools : [];
    tools.forEach((name, ti) => {
      const id = `call_${mi}_${ti}`;
      toolIds.push(id);
      content.push({ type: 'toolCall', id, name, arguments: { path: `f${ti}` } });
      lines.push(
        JSON.stringify({
          type: 'message_update',
          assistantMessageEvent: { type: 'toolcall_end', contentIndex: content.length - 1 },
          message: snap(),
        }),
      );
    });
    lines.push(
      JSON.stringify({
        type: 'message_end',
        message: { ...snap(), ...(m.stop === 'error' ? { errorMessage: '500 fuzz error' } : {}) },
      }),
    );
    for (const [ti, name] of tools.entries()) {
      const toolCallId = `call_${mi}_${ti}`;
      lines.push(
        JSON.stringify({ type: 'tool_execution_start', toolCallId, toolName: name, args: { path: `f${ti}` } }),
      );
      lines.push(
        JSON.stringify({
          type: 'tool_execution_end',
          toolCallId,
          toolName: name,
          result: { content: [{ type: 'text', text: 'ok' }] },
          isError: ti % 2 === 1,
        }),
      );
      lines.push(
        JSON.stringify({
          type: 'message_end',
          message: { role: 'toolResult', toolCallId, toolName: name, content: [], isError: ti % 2 === 1 },
        }),
      );
    }
    lines.push(JSON.stringify({ type: 'turn_end', message: snap(), toolResults: [] }));
  });
  lines.push(JSON.stringify({ type: 'agent_end', messages: [] }));
  text = expectedText(plan);
  return { lines, text, thinking, toolIds };
}

/**
 * The text the deltas must add up to: every message's text, except that a message after a
 * tool turn which replays earlier text (the previous message's, or the whole run's) adds
 * only what goes beyond it, and one that is exactly such a replay adds nothing.
 */
function expectedText(plan: PlannedMessage[]): string {
  let run = '';
  let previous = '';
  let previousStop: string | null = null;
  for (const m of plan) {
    const t = m.text.join('');
    let added = t;
    if (previousStop === 'toolUse') {
      const candidates = [previous, run].filter((c) => c !== '');
      if (candidates.includes(t)) added = '';
      else {
        const replayed = candidates
          .filter((c) => t.startsWith(c) && t.length > c.length)
          .sort((a, b) => b.length - a.length)[0];
        if (replayed !== undefined) added = t.slice(replayed.length);
      }
    }
    run += added;
    previous = t;
    previousStop = m.stop;
  }
  return run;
}

const garbage = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.constantFrom('{"type":', '[]', 'null', '{"x":1}', '{"type":42}', 'Error: boom'),
);

describe('pi mapper, fuzzed with random valid event sequences and garbage', () => {
  it('text, thinking and tool results come out exactly once, with one terminal last, whatever garbage is interleaved', () => {
    fc.assert(
      fc.property(
        fc.array(message, { minLength: 1, maxLength: 5 }),
        fc.boolean(),
        fc.array(fc.tuple(fc.nat(), garbage), { maxLength: 10 }),
        (plan, snapshots, inserts) => {
          const { lines, text, thinking, toolIds } = stream(plan, snapshots);
          const out = mapLines(interleave(lines, inserts));
          expect(out.map((m) => (m.type === 'assistant' ? m.content.text : '')).join('')).toBe(text);
          expect(out.map((m) => (m.type === 'assistant.thought' ? m.content.text : '')).join('')).toBe(thinking);
          for (const id of toolIds) {
            expect(out.filter((m) => m.type === 'tool.call' && m.content.toolCallId === id)).toHaveLength(1);
            expect(
              out.filter(
                (m) => (m.type === 'tool.completed' || m.type === 'tool.failed') && m.content.toolCallId === id,
              ),
            ).toHaveLength(1);
          }
          expect(out.filter(isTerminal)).toHaveLength(1);
          expect(isTerminal(out.at(-1)!)).toBe(true);
          const last = plan.at(-1)!;
          expect(out.at(-1)!.type).toBe(last.stop === 'error' ? 'terminal.failed' : 'terminal.completed');
        },
      ),
      { numRuns: 300 },
    );
  });
});
