import { describe, expect, it } from 'vitest';
import { piStateAfterTool } from '../../../src/agents/pi/session-file.ts';

const lines = [
  { type: 'session', id: 's1', cwd: '/w' },
  { type: 'message', id: 'm1', message: { role: 'user', content: 'go' } },
  { type: 'message', id: 'm2', message: { role: 'assistant', content: [{ type: 'toolCall', id: 'call_1' }] } },
  { type: 'message', id: 'm3', message: { role: 'toolResult', toolCallId: 'call_1', content: [] } },
  { type: 'message', id: 'm4', message: { role: 'assistant', content: [{ type: 'toolCall', id: 'call_2' }] } },
].map((l) => `${JSON.stringify(l)}\n`);
const state = { fileName: '2026_s1.jsonl', content: lines.join('') };

describe('piStateAfterTool', () => {
  it('cuts the session file just after the result of the call, and says a later tool call follows', () => {
    expect(piStateAfterTool(state, 'call_1')).toEqual({
      state: { fileName: '2026_s1.jsonl', content: lines.slice(0, 4).join('') },
      later: true,
    });
  });

  it('is null while the file holds no result of the call (its call alone does not count)', () => {
    expect(piStateAfterTool(state, 'call_2')).toBeNull();
  });

  it('says no later tool call when none follows the result', () => {
    const upTo = { ...state, content: lines.slice(0, 4).join('') };
    expect(piStateAfterTool(upTo, 'call_1')?.later).toBe(false);
  });
});
