import { describe, expect, it } from 'vitest';
import { compareLogs, countStall, type Entry } from '../../bench/peers/log-checks.ts';

const DELTAS = ['a ', 'b ', 'c '];

/** One attempt's output of the deterministic fake: session.started, `deltas` assistant deltas, then `terminal` (if any). */
function attemptOf(attempt: number, deltas: number, terminal: string | null): Array<Omit<Entry, 'seq'>> {
  const out: Array<Omit<Entry, 'seq'>> = [{ attempt, type: 'session.started', content: { sessionId: 'x' } }];
  for (let i = 0; i < deltas; i += 1)
    out.push({ attempt, type: 'assistant', content: { text: DELTAS[i % DELTAS.length] } });
  if (terminal !== null) out.push({ attempt, type: terminal, content: {} });
  return out;
}

const numbered = (entries: Array<Omit<Entry, 'seq'>>): Entry[] => entries.map((m, i) => ({ ...m, seq: i + 1 }));

describe('compareLogs (kill -9: lost and duplicated messages)', () => {
  const perTurn = 6; // session.started, 4 deltas, terminal
  const before = numbered(attemptOf(1, 2, null));

  it('counts nothing lost or duplicated when the interrupted attempt is kept and a second attempt completes', () => {
    const after = numbered([...attemptOf(1, 2, 'terminal.failed'), ...attemptOf(2, 4, 'terminal.completed')]);
    const r = compareLogs(new Map([['s', before]]), new Map([['s', after]]), perTurn, DELTAS);
    expect(r).toEqual({ lost: 0, duplicated: 0, extra: 4, attempts: [2] });
  });

  it('counts the messages a reader saw before the kill that are gone afterwards', () => {
    const after = numbered(attemptOf(2, 4, 'terminal.completed'));
    const r = compareLogs(new Map([['s', before]]), new Map([['s', after]]), perTurn, DELTAS);
    expect(r.lost).toBe(3);
  });

  it('counts a gap in the seqs as lost', () => {
    const after = numbered([...attemptOf(1, 2, 'terminal.failed'), ...attemptOf(2, 4, 'terminal.completed')]).filter(
      (m) => m.seq !== 6,
    );
    expect(compareLogs(new Map([['s', before]]), new Map([['s', after]]), perTurn, DELTAS).lost).toBe(1);
  });

  it('counts messages an attempt holds twice: a re-appended delta, a second start, a second terminal', () => {
    const attempt1 = attemptOf(1, 2, null);
    const replayed = [...attempt1, ...attempt1.slice(1), ...attemptOf(1, 0, 'terminal.completed').slice(1)];
    const after = numbered([
      ...replayed,
      { attempt: 1, type: 'session.started', content: {} },
      { attempt: 1, type: 'terminal.completed', content: {} },
    ]);
    const r = compareLogs(new Map([['s', before]]), new Map([['s', after]]), perTurn, DELTAS);
    // the two re-appended deltas (out of the agent's order), one extra start, one extra terminal
    expect(r.duplicated).toBe(4);
  });
});

describe('countStall (a stalled worker: turns run twice, stale writes)', () => {
  it('counts the writes of the first run that land after the second run started, and turns completed twice', () => {
    const log = [
      { type: 'session.started', by: 'A' },
      { type: 'assistant', by: 'A' },
      { type: 'session.started', by: 'B' },
      { type: 'assistant', by: 'A' },
      { type: 'assistant', by: 'B' },
      { type: 'terminal.completed', by: 'B' },
      { type: 'terminal.completed', by: 'A' },
    ];
    expect(countStall([log], 3)).toEqual({
      turns: 1,
      ranTwice: 1,
      completedTwice: 1,
      staleWrites: 2,
      extraMessages: 4,
    });
  });

  it('counts no stale write when the first run stopped before the second one started', () => {
    const log = [
      { type: 'session.started', by: 'attempt 1' },
      { type: 'assistant', by: 'attempt 1' },
      { type: 'session.started', by: 'attempt 2' },
      { type: 'assistant', by: 'attempt 2' },
      { type: 'terminal.completed', by: 'attempt 2' },
    ];
    expect(countStall([log], 3)).toEqual({
      turns: 1,
      ranTwice: 1,
      completedTwice: 0,
      staleWrites: 0,
      extraMessages: 2,
    });
  });
});
