import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FAILURE_CATEGORIES } from '../../src/protocol/messages.ts';
import { baseDelay, delayFor, type RetryFailure } from '../../src/retry/backoff.ts';
import type { RetryPolicy } from '../../src/retry/policy.ts';
import { jitterArb, policyWith, validPolicyArb } from './fixtures.ts';

const network: RetryFailure = { category: 'network' };
const fixed = (r: number) => () => r;
const noJitter = policyWith({ jitter: 'none' });

describe('baseDelay', () => {
  it('doubles from initialDelayMs by default and stops at maxDelayMs', () => {
    const delays = [1, 2, 3, 4, 5, 6, 7, 8].map((attempt) => baseDelay(attempt, noJitter));
    expect(delays).toEqual([1000, 2000, 4000, 8000, 16_000, 32_000, 60_000, 60_000]);
  });

  it('stays at initialDelayMs with multiplier 1', () => {
    const policy = policyWith({ multiplier: 1, initialDelayMs: 250 });
    expect([1, 2, 50].map((a) => baseDelay(a, policy))).toEqual([250, 250, 250]);
  });

  it('rounds fractional growth to whole milliseconds', () => {
    const policy = policyWith({ multiplier: 1.1, initialDelayMs: 1000 });
    expect([1, 2, 3].map((a) => baseDelay(a, policy))).toEqual([1000, 1100, 1210]);
  });

  it('saturates at maxDelayMs instead of overflowing for huge attempts', () => {
    const policy = policyWith({ multiplier: 10, maxDelayMs: 86_400_000 });
    expect(baseDelay(1000, policy)).toBe(86_400_000);
    expect(baseDelay(Number.MAX_SAFE_INTEGER, policy)).toBe(86_400_000);
  });

  it('is 0 at every attempt when initialDelayMs is 0', () => {
    const policy = policyWith({ initialDelayMs: 0, multiplier: 10 });
    expect([1, 400, 1000].map((a) => baseDelay(a, policy))).toEqual([0, 0, 0]);
  });

  it.each([0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY])('throws a RangeError for attempt %s', (attempt) => {
    expect(() => baseDelay(attempt, noJitter)).toThrow(RangeError);
    expect(() => delayFor(attempt, noJitter, network)).toThrow(/attempt must be an integer >= 1/);
  });

  it('never decreases as the attempt grows', () => {
    fc.assert(
      fc.property(validPolicyArb, fc.integer({ min: 1, max: 999 }), (policy, attempt) => {
        expect(baseDelay(attempt + 1, policy)).toBeGreaterThanOrEqual(baseDelay(attempt, policy));
      }),
    );
  });
});

describe('delayFor jitter', () => {
  it("'none' returns the base delay, ignoring random", () => {
    expect(delayFor(3, noJitter, network, fixed(0.7))).toBe(4000);
  });

  it("'full' spreads over [0, base]", () => {
    const policy = policyWith({ jitter: 'full' });
    expect(delayFor(3, policy, network, fixed(0))).toBe(0);
    expect(delayFor(3, policy, network, fixed(0.5))).toBe(2000);
    expect(delayFor(3, policy, network, fixed(0.999_999))).toBe(4000);
  });

  it("'equal' spreads over [base/2, base]", () => {
    const policy = policyWith({ jitter: 'equal' });
    expect(delayFor(3, policy, network, fixed(0))).toBe(2000);
    expect(delayFor(3, policy, network, fixed(0.5))).toBe(3000);
    expect(delayFor(3, policy, network, fixed(1))).toBe(4000);
  });

  it("'equal' rounds an odd base's half up so the result stays inside the interval", () => {
    const policy = policyWith({ jitter: 'equal', initialDelayMs: 5 });
    expect(delayFor(1, policy, network, fixed(0))).toBe(3);
  });

  it('a factor f spreads over [base × (1 − f), base]', () => {
    const policy = policyWith({ jitter: 0.25 });
    expect(delayFor(3, policy, network, fixed(0))).toBe(4000);
    expect(delayFor(3, policy, network, fixed(1))).toBe(3000);
    expect(delayFor(3, policy, network, fixed(0.5))).toBe(3500);
  });

  it("factor 0 adds no jitter and factor 1 spans [0, base] like 'full'", () => {
    expect(delayFor(3, policyWith({ jitter: 0 }), network, fixed(0.3))).toBe(4000);
    expect(delayFor(3, policyWith({ jitter: 1 }), network, fixed(1))).toBe(0);
    expect(delayFor(3, policyWith({ jitter: 1 }), network, fixed(0))).toBe(4000);
  });

  it.each([-1, 2, Number.NaN, Number.POSITIVE_INFINITY])('clamps a random() that returns %s into [0, 1]', (r) => {
    const delay = delayFor(3, policyWith({ jitter: 'full' }), network, fixed(r));
    expect(delay === 0 || delay === 4000).toBe(true);
  });

  it('uses Math.random by default', () => {
    const delay = delayFor(3, policyWith({ jitter: 'full' }), network);
    expect(delay).toBeGreaterThanOrEqual(0);
    expect(delay).toBeLessThanOrEqual(4000);
  });
});

describe('delayFor Retry-After', () => {
  const policy = policyWith({ jitter: 'none', maxRetryAfterMs: 30_000 });

  it('waits for a Retry-After longer than the backoff', () => {
    expect(delayFor(1, policy, { category: 'rate_limited', retryAfterMs: 12_000 })).toBe(12_000);
  });

  it('caps the honoured Retry-After at maxRetryAfterMs', () => {
    expect(delayFor(1, policy, { category: 'rate_limited', retryAfterMs: 3_600_000 })).toBe(30_000);
  });

  it('keeps the backoff when Retry-After is shorter', () => {
    expect(delayFor(3, policy, { category: 'rate_limited', retryAfterMs: 10 })).toBe(4000);
  });

  it('never lets a low maxRetryAfterMs shorten the backoff', () => {
    const lowCap = policyWith({ jitter: 'none', maxRetryAfterMs: 500 });
    expect(delayFor(3, lowCap, { category: 'rate_limited', retryAfterMs: 9000 })).toBe(4000);
  });

  it('ignores Retry-After when honorRetryAfter is off', () => {
    const ignoring = policyWith({ jitter: 'none', honorRetryAfter: false });
    expect(delayFor(1, ignoring, { category: 'rate_limited', retryAfterMs: 12_000 })).toBe(1000);
  });

  it.each([Number.NaN, Number.POSITIVE_INFINITY, -5000])('ignores a Retry-After of %s', (retryAfterMs) => {
    expect(delayFor(1, policy, { category: 'rate_limited', retryAfterMs })).toBe(1000);
  });

  it('rounds a fractional Retry-After up to whole milliseconds', () => {
    expect(delayFor(1, policy, { category: 'rate_limited', retryAfterMs: 1500.2 })).toBe(1501);
  });
});

describe('delayFor bounds (property)', () => {
  const failureArb = fc.record(
    {
      category: fc.constantFrom(...FAILURE_CATEGORIES),
      retryAfterMs: fc.oneof(fc.integer({ min: 0, max: 200_000_000 }), fc.constant(undefined)),
    },
    { requiredKeys: ['category'] },
  );
  const randomArb = fc.oneof(
    fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
    fc.constantFrom(0, 0.5, 0.999_999_999),
  );

  function jitterInterval(base: number, jitter: RetryPolicy['jitter']): [number, number] {
    if (jitter === 'none') return [base, base];
    if (jitter === 'full') return [0, base];
    if (jitter === 'equal') return [base / 2, base];
    return [base * (1 - jitter), base];
  }

  it('stays an integer within the documented interval for every jitter mode and attempts 1..1000', () => {
    fc.assert(
      fc.property(
        validPolicyArb,
        jitterArb,
        fc.integer({ min: 1, max: 1000 }),
        failureArb,
        randomArb,
        (anyPolicy, jitter, attempt, failure, r) => {
          const policy = { ...anyPolicy, jitter };
          const delay = delayFor(attempt, policy, failure, () => r);
          const base = baseDelay(attempt, policy);
          const cappedHint =
            policy.honorRetryAfter && failure.retryAfterMs !== undefined
              ? Math.min(failure.retryAfterMs, policy.maxRetryAfterMs)
              : 0;

          expect(Number.isSafeInteger(delay)).toBe(true);
          expect(delay).toBeGreaterThanOrEqual(0);
          expect(delay).toBeLessThanOrEqual(Math.max(policy.maxDelayMs, cappedHint));

          const [low, high] = jitterInterval(base, jitter);
          expect(delay).toBeGreaterThanOrEqual(Math.max(low, cappedHint));
          expect(delay).toBeLessThanOrEqual(Math.max(high, cappedHint));
        },
      ),
      { numRuns: 3000 },
    );
  });

  it('without jitter, never decreases as the attempt grows', () => {
    fc.assert(
      fc.property(validPolicyArb, fc.integer({ min: 1, max: 999 }), (anyPolicy, attempt) => {
        const policy = { ...anyPolicy, jitter: 'none' as const };
        expect(delayFor(attempt + 1, policy, network)).toBeGreaterThanOrEqual(delayFor(attempt, policy, network));
      }),
    );
  });
});
