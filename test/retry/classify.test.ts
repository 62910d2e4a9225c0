import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FAILURE_CATEGORIES, type FailureCategory } from '../../src/protocol/messages.ts';
import { delayFor } from '../../src/retry/backoff.ts';
import { MAX_FREE_WALLS, NEVER_RETRY_BY_DEFAULT, decideRetry } from '../../src/retry/classify.ts';
import { DEFAULT_RETRY_POLICY } from '../../src/retry/policy.ts';
import { policyWith, validPolicyArb } from './fixtures.ts';

const half = () => 0.5;

describe('decideRetry', () => {
  it('retries a retryable failure after the backoff delay', () => {
    expect(decideRetry(DEFAULT_RETRY_POLICY, { category: 'network' }, 1, half)).toEqual({ retry: true, delayMs: 750 });
    expect(decideRetry(DEFAULT_RETRY_POLICY, { category: 'timeout' }, 3, half)).toEqual({
      retry: true,
      delayMs: delayFor(3, DEFAULT_RETRY_POLICY, { category: 'timeout' }, half),
    });
  });

  it('passes Retry-After through to the delay', () => {
    expect(decideRetry(DEFAULT_RETRY_POLICY, { category: 'rate_limited', retryAfterMs: 20_000 }, 1, half)).toEqual({
      retry: true,
      delayMs: 20_000,
    });
  });

  it('stops once the failed attempt reaches maxAttempts, attempts counting the first', () => {
    expect(decideRetry(DEFAULT_RETRY_POLICY, { category: 'network' }, 3, half).retry).toBe(true);
    expect(decideRetry(DEFAULT_RETRY_POLICY, { category: 'network' }, 4, half)).toEqual({
      retry: false,
      reason: 'attempts_exhausted',
    });
    expect(decideRetry(DEFAULT_RETRY_POLICY, { category: 'network' }, 9, half)).toEqual({
      retry: false,
      reason: 'attempts_exhausted',
    });
  });

  it('never retries with maxAttempts 1', () => {
    expect(decideRetry(policyWith({ maxAttempts: 1 }), { category: 'network' }, 1)).toEqual({
      retry: false,
      reason: 'attempts_exhausted',
    });
  });

  it('reports retry_disabled before anything else when the policy is off', () => {
    const off = policyWith({ enabled: false, maxAttempts: 1 });
    expect(decideRetry(off, { category: 'network' }, 1)).toEqual({ retry: false, reason: 'retry_disabled' });
    expect(decideRetry(off, { category: 'auth' }, 5)).toEqual({ retry: false, reason: 'retry_disabled' });
  });

  it('reports not_retryable before attempts_exhausted', () => {
    expect(decideRetry(DEFAULT_RETRY_POLICY, { category: 'auth' }, 4)).toEqual({
      retry: false,
      reason: 'not_retryable',
    });
  });

  it.each(NEVER_RETRY_BY_DEFAULT)(
    'never retries %s under the default retryOn, whatever maxAttempts says',
    (category) => {
      const generous = policyWith({ maxAttempts: 100 });
      expect(decideRetry(generous, { category, retryAfterMs: 1000 }, 1)).toEqual({
        retry: false,
        reason: 'not_retryable',
      });
    },
  );

  it('retries a category the policy opts in to', () => {
    expect(decideRetry(policyWith({ retryOn: ['auth'] }), { category: 'auth' }, 1, half).retry).toBe(true);
    expect(decideRetry(policyWith({ retryOn: ['auth'] }), { category: 'network' }, 1, half)).toEqual({
      retry: false,
      reason: 'not_retryable',
    });
  });

  it('retries nothing with an empty retryOn', () => {
    const none = policyWith({ retryOn: [] });
    for (const category of FAILURE_CATEGORIES) {
      expect(decideRetry(none, { category }, 1)).toEqual({ retry: false, reason: 'not_retryable' });
    }
  });

  it.each([0, -2, 1.5, Number.NaN])('throws a RangeError for attempt %s', (attempt) => {
    expect(() => decideRetry(DEFAULT_RETRY_POLICY, { category: 'network' }, attempt)).toThrow(RangeError);
  });

  it('runs at most maxAttempts attempts for any policy and any sequence of failures', () => {
    fc.assert(
      fc.property(
        validPolicyArb,
        fc.array(fc.constantFrom(...FAILURE_CATEGORIES), { minLength: 101, maxLength: 101 }),
        (policy, failures) => {
          let attempt = 1;
          for (const category of failures) {
            const decision = decideRetry(policy, { category }, attempt, half);
            if (!decision.retry) break;
            expect(policy.enabled && policy.retryOn.includes(category)).toBe(true);
            expect(decision.delayMs).toBe(delayFor(attempt, policy, { category }, half));
            attempt += 1;
          }
          expect(attempt).toBeLessThanOrEqual(policy.maxAttempts);
        },
      ),
    );
  });
});

describe('NEVER_RETRY_BY_DEFAULT', () => {
  it('is exactly the categories outside the default retryOn', () => {
    const outside = FAILURE_CATEGORIES.filter((c: FailureCategory) => !DEFAULT_RETRY_POLICY.retryOn.includes(c));
    expect([...NEVER_RETRY_BY_DEFAULT].sort()).toEqual([...outside].sort());
  });

  it('includes auth, bad_request, startup and invalid_output', () => {
    expect(NEVER_RETRY_BY_DEFAULT).toEqual(
      expect.arrayContaining(['auth', 'bad_request', 'startup', 'invalid_output']),
    );
  });
});

describe('decideRetry at a quota wall (a rate limit whose reset lies past maxRetryAfterMs)', () => {
  const hour = { category: 'rate_limited' as const, retryAfterMs: 3_600_000 };

  it('parks until the reset, uncapped by maxRetryAfterMs, and free by default: even the last attempt may park', () => {
    expect(decideRetry(policyWith({ maxAttempts: 1 }), hour, 1)).toEqual({
      retry: true,
      delayMs: 3_600_000,
      wall: { free: true },
    });
  });

  it('counted: the last attempt ends the turn attempts_exhausted, an earlier one parks', () => {
    const counted = policyWith({ maxAttempts: 2, rateLimitAttempts: 'counted' });
    expect(decideRetry(counted, hour, 2)).toEqual({ retry: false, reason: 'attempts_exhausted' });
    expect(decideRetry(counted, hour, 1)).toEqual({ retry: true, delayMs: 3_600_000, wall: { free: false } });
  });

  it('a reset past maxParkMs fails with quota_wall_too_long; maxParkMs 0 never parks', () => {
    expect(decideRetry(policyWith({ maxParkMs: 3_599_999 }), hour, 1)).toEqual({
      retry: false,
      reason: 'quota_wall_too_long',
    });
    expect(decideRetry(policyWith({ maxParkMs: 0 }), hour, 1)).toEqual({ retry: false, reason: 'quota_wall_too_long' });
  });

  it('after MAX_FREE_WALLS free walls in a turn, the next wall counts', () => {
    expect(decideRetry(policyWith({ maxAttempts: 1 }), hour, 1, Math.random, MAX_FREE_WALLS)).toEqual({
      retry: false,
      reason: 'attempts_exhausted',
    });
  });

  it('is no wall when Retry-After is not honoured, the category is not rate_limited, or the hint is within maxRetryAfterMs', () => {
    expect(decideRetry(policyWith({ honorRetryAfter: false, jitter: 'none' }), hour, 1)).toEqual({
      retry: true,
      delayMs: 1000,
    });
    expect(
      decideRetry(policyWith({ jitter: 'none' }), { category: 'server_error', retryAfterMs: 3_600_000 }, 1),
    ).toEqual({ retry: true, delayMs: 600_000 });
    expect(decideRetry(policyWith({ jitter: 'none' }), { category: 'rate_limited', retryAfterMs: 600_000 }, 1)).toEqual(
      { retry: true, delayMs: 600_000 },
    );
  });

  it('respects retryOn and enabled first', () => {
    expect(decideRetry(policyWith({ retryOn: ['network'] }), hour, 1)).toEqual({
      retry: false,
      reason: 'not_retryable',
    });
    expect(decideRetry(policyWith({ enabled: false }), hour, 1)).toEqual({ retry: false, reason: 'retry_disabled' });
  });
});
