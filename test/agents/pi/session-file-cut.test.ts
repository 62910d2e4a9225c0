import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  exportPiSession,
  forkPiSession,
  importPiSession,
  piStateAfterTool,
  piStateAtMark,
  piStateMark,
} from '../../../src/agents/pi/session-file.ts';

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

describe('piStateMark / piStateAtMark (undo and fork of a turn)', () => {
  const id = '0a1b2c3d-0000-4000-8000-000000000001';
  const header = { type: 'session', id, cwd: '/a' };
  const file = [header, ...lines.slice(1).map((l) => JSON.parse(l) as unknown)].map((l) => `${JSON.stringify(l)}\n`);
  const whole = { fileName: `2026-12-03T06-00-00_${id}.jsonl`, content: file.join('') };

  it('the mark is the count of whole lines; a torn last line is not one', () => {
    expect(piStateMark(whole)).toBe(5);
    expect(piStateMark({ ...whole, content: `${whole.content}{"type":"mess` })).toBe(5);
  });

  it('the cut is the file’s first lines, whole: every line of it parses, the header first', () => {
    const cut = piStateAtMark({ ...whole, content: `${whole.content}{"type":"mess` }, 3);
    expect(cut).toEqual({ fileName: whole.fileName, content: file.slice(0, 3).join('') });
    const parsed = cut.content
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as { type: string });
    expect(parsed.map((e) => e.type)).toEqual(['session', 'message', 'message']);
  });

  it('a mark survives the header’s rewrites: an import elsewhere (its cwd) and a fork (its id)', async () => {
    const mark = piStateMark({ ...whole, content: file.slice(0, 4).join('') });
    const dir = mkdtempSync(join(tmpdir(), 'sessiond-pi-mark-'));
    try {
      await importPiSession(dir, whole, '/a/much/longer/working/directory', id, true);
      const moved = await exportPiSession(dir, id);
      expect(moved).not.toBeNull();
      const to = '0a1b2c3d-0000-4000-8000-000000000002';
      const forked = forkPiSession(moved ?? whole, id, to);
      const cut = piStateAtMark(forked, mark);
      const entries = cut.content
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as { type: string; id: string; cwd?: string });
      expect(entries.map((e) => e.id)).toEqual([to, 'm1', 'm2', 'm3']);
      expect(entries[0]?.cwd).toBe('/a/much/longer/working/directory');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a mark the file does not reach, and one that is not a whole number ≥ 1', () => {
    expect(() => piStateAtMark(whole, 6)).toThrow(/holds 5 whole lines, not 6/);
    expect(() => piStateAtMark(whole, 0)).toThrow(/mark: must be a whole number/);
    expect(() => piStateAtMark(whole, 1.5)).toThrow(/mark: must be a whole number/);
  });
});
