import { describe, expect, it } from 'vitest';
import type { AttemptRecord, SessionContext } from '../../machines/types.ts';
import { AttemptTally, attemptFields, parseField } from '../../src/runtime/counters.ts';

const attempt = (n: number, patch: Partial<AttemptRecord> = {}): AttemptRecord => ({
  attempt: n,
  startedAt: 0,
  endedAt: null,
  outcome: null,
  category: null,
  errorText: null,
  delayMs: null,
  promptRecorded: false,
  ...patch,
});
const context = (turnIndex: number, attempts: AttemptRecord[]): SessionContext =>
  ({ turnIndex, turn: { index: turnIndex, attempts } }) as unknown as SessionContext;

describe('AttemptTally (which ended attempts a holder counts)', () => {
  it('counts each ended attempt once, with its retry, across turns', () => {
    const tally = new AttemptTally(null);
    expect(tally.ended(context(1, [attempt(1)]))).toEqual([]);
    const failed = attempt(1, { outcome: 'failed', category: 'server_error', delayMs: 100 });
    expect(tally.ended(context(1, [failed]))).toEqual(['attempts|failed|server_error', 'retries|server_error']);
    expect(tally.ended(context(1, [failed, attempt(2)]))).toEqual([]);
    expect(tally.ended(context(1, [failed, attempt(2, { outcome: 'completed' })]))).toEqual([
      'attempts|completed|none',
    ]);
    expect(tally.ended(context(1, [failed, attempt(2, { outcome: 'completed' })]))).toEqual([]);
    expect(tally.ended(context(2, [attempt(1, { outcome: 'cancelled' })]))).toEqual(['attempts|cancelled|none']);
  });

  it('a holder that loads a snapshot does not count again what had ended in it, but counts the interrupted attempt it restores', () => {
    const loaded = context(3, [attempt(1, { outcome: 'failed', category: 'rate_limited', delayMs: 10 }), attempt(2)]);
    const tally = new AttemptTally(loaded);
    expect(tally.ended(loaded)).toEqual([]);
    const restored = context(3, [
      attempt(1, { outcome: 'failed', category: 'rate_limited', delayMs: 10 }),
      attempt(2, { outcome: 'interrupted', category: 'worker_lost' as never }),
    ]);
    expect(tally.ended(restored)).toEqual(['attempts|interrupted|worker_lost']);
  });

  it('fields parse back into their labels, and foreign fields are ignored', () => {
    expect(attemptFields(attempt(1, { outcome: 'failed' }))).toEqual(['attempts|failed|unknown']);
    expect(parseField('attempts|failed|timeout')).toEqual({ kind: 'attempts', outcome: 'failed', category: 'timeout' });
    expect(parseField('retries|server_error')).toEqual({ kind: 'retries', category: 'server_error' });
    expect(parseField('tokens|input')).toBeNull();
  });
});
