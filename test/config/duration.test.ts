import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatDuration, parseDuration } from '../../src/config/duration.ts';

const EXPECTED =
  'expected a number with a unit ms, s, m, h or d (e.g. 500ms, 2s, 1.5m, 1h, 30d) or a whole number of milliseconds';

describe('parseDuration', () => {
  it.each([
    ['500ms', 500],
    ['2s', 2000],
    ['1m', 60_000],
    ['1h', 3_600_000],
    ['30d', 2_592_000_000],
    ['1.5s', 1500],
    ['1.1s', 1100],
    ['0.001s', 1],
    ['1.25h', 4_500_000],
    ['1500', 1500],
    ['0', 0],
    ['0ms', 0],
    ['007s', 7000],
    [' 3s ', 3000],
  ])('reads %j as %i ms', (text, ms) => {
    expect(parseDuration(text)).toEqual({ ok: true, ms });
  });

  it.each([
    ['', `invalid duration: empty; ${EXPECTED}`],
    ['   ', `invalid duration: empty; ${EXPECTED}`],
    ['-5s', 'invalid duration "-5s": must not be negative'],
    ['-100', 'invalid duration "-100": must not be negative'],
    ['abc', `invalid duration "abc": ${EXPECTED}`],
    ['5 s', `invalid duration "5 s": ${EXPECTED}`],
    ['1m30s', `invalid duration "1m30s": ${EXPECTED}`],
    ['2w', `invalid duration "2w": ${EXPECTED}`],
    ['2S', `invalid duration "2S": ${EXPECTED}`],
    ['.5s', `invalid duration ".5s": ${EXPECTED}`],
    ['5.s', `invalid duration "5.s": ${EXPECTED}`],
    ['1e3', `invalid duration "1e3": ${EXPECTED}`],
    ['Infinity', `invalid duration "Infinity": ${EXPECTED}`],
    ['1.5', 'invalid duration "1.5": a number without a unit is milliseconds and must be whole'],
    ['0.0005s', 'invalid duration "0.0005s": finer than a millisecond'],
    ['1.5ms', 'invalid duration "1.5ms": finer than a millisecond'],
    ['99999999999999999999h', 'invalid duration "99999999999999999999h": too large'],
  ])('rejects %j with a clear message', (text, message) => {
    expect(parseDuration(text)).toEqual({ ok: false, message });
  });

  it('rejects a value that is not a string without throwing', () => {
    expect(parseDuration(5 as unknown as string)).toEqual({
      ok: false,
      message: `invalid duration: ${EXPECTED} (got number)`,
    });
  });

  it('shortens a long input in the message', () => {
    const result = parseDuration('x'.repeat(1000));
    expect(!result.ok && result.message.length).toBeLessThan(200);
  });

  it('never throws, and accepts only whole non-negative safe integers of ms', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.stringMatching(/^-?\d{0,20}(\.\d{0,6})?(ms|s|m|h|x)?$/)), (text) => {
        const result = parseDuration(text);
        if (result.ok) {
          expect(Number.isSafeInteger(result.ms)).toBe(true);
          expect(result.ms).toBeGreaterThanOrEqual(0);
        } else {
          expect(result.message).toMatch(/^invalid duration/);
        }
      }),
    );
  });
});

describe('formatDuration', () => {
  it.each([
    [0, '0ms'],
    [1, '1ms'],
    [500, '500ms'],
    [999, '999ms'],
    [1000, '1s'],
    [1500, '1.5s'],
    [1234, '1.234s'],
    [61_000, '61s'],
    [60_000, '1m'],
    [90_000, '1.5m'],
    [120_000, '2m'],
    [3_600_000, '1h'],
    [5_400_000, '1.5h'],
    [86_400_000, '24h'],
  ])('shows %i ms as %j', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });

  it('rounds fractional milliseconds and keeps the sign of negatives', () => {
    expect(formatDuration(1.6)).toBe('2ms');
    expect(formatDuration(-1500)).toBe('-1.5s');
  });

  it('shows non-finite values as they are', () => {
    expect(formatDuration(Number.NaN)).toBe('NaN');
    expect(formatDuration(Number.POSITIVE_INFINITY)).toBe('Infinity');
  });

  it('parses back to the same number of milliseconds', () => {
    fc.assert(
      fc.property(fc.oneof(fc.integer({ min: 0, max: 100_000_000 }), fc.maxSafeNat()), (ms) => {
        expect(parseDuration(formatDuration(ms))).toEqual({ ok: true, ms });
      }),
      { numRuns: 2000 },
    );
  });
});
