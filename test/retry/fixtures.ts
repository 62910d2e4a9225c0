import fc from 'fast-check';
import { FAILURE_CATEGORIES } from '../../src/protocol/messages.ts';
import { parseRetryPolicy, type RetryPolicy, type RetryPolicyInput } from '../../src/retry/policy.ts';

/** A validated policy with the given overrides; throws if they are invalid, so tests fail loudly. */
export function policyWith(overrides: RetryPolicyInput = {}): RetryPolicy {
  const result = parseRetryPolicy(overrides);
  if (!result.ok) throw new Error(result.errors.map((e) => e.message).join('\n'));
  return result.policy;
}

export const jitterArb = fc.oneof(
  fc.constantFrom('none' as const, 'full' as const, 'equal' as const),
  fc.double({ min: 0, max: 1, noNaN: true }),
);

/** Any policy that `parseRetryPolicy` accepts. */
export const validPolicyArb: fc.Arbitrary<RetryPolicy> = fc
  .record({
    enabled: fc.boolean(),
    maxAttempts: fc.integer({ min: 1, max: 100 }),
    initialDelayMs: fc.integer({ min: 0, max: 3_600_000 }),
    multiplier: fc.double({ min: 1, max: 10, noNaN: true }),
    extraDelayMs: fc.integer({ min: 0, max: 86_400_000 }),
    jitter: jitterArb,
    retryOn: fc.uniqueArray(fc.constantFrom(...FAILURE_CATEGORIES)),
    honorRetryAfter: fc.boolean(),
    maxRetryAfterMs: fc.integer({ min: 0, max: 86_400_000 }),
    maxTurnMs: fc.integer({ min: 0, max: 604_800_000 }),
  })
  .map(({ extraDelayMs, ...rest }) =>
    policyWith({ ...rest, maxDelayMs: Math.min(86_400_000, rest.initialDelayMs + extraDelayMs) }),
  );
