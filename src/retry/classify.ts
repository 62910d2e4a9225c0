import type { FailureCategory } from '../protocol/messages.ts';
import { delayFor, type RetryFailure } from './backoff.ts';
import { DEFAULT_RETRY_POLICY, type RetryPolicy } from './policy.ts';

/**
 * Categories outside the default `retryOn`: with the default policy they are never retried,
 * whatever maxAttempts says. Retrying does not fix bad credentials, a rejected request, a binary
 * that will not start or output the mapper cannot read; `unknown` is excluded until understood.
 * A policy may still opt any of them in through `retryOn`.
 */
export const NEVER_RETRY_BY_DEFAULT = [
  'auth',
  'bad_request',
  'startup',
  'invalid_output',
  'quota',
  'unknown',
] as const satisfies readonly FailureCategory[];

/** `quota_wall_too_long`: the rate limit's reset lies further away than the policy's maxParkMs. */
export type NoRetryReason = 'retry_disabled' | 'not_retryable' | 'attempts_exhausted' | 'quota_wall_too_long';

/**
 * `wall`: a quota wall — the next attempt waits (parked) until the provider's reset, `delayMs` from
 * now; `free` when the attempt that hit it does not count against maxAttempts.
 */
export type RetryDecision =
  { retry: true; delayMs: number; wall?: { free: boolean } } | { retry: false; reason: NoRetryReason };

/** Free quota walls one turn may hit before the next ones count (so that a wall that never lifts cannot retry forever). */
export const MAX_FREE_WALLS = 100;

/**
 * A rate limit whose reset lies past what the normal backoff honours (maxRetryAfterMs): a quota wall.
 * Contract: pure.
 */
export function isQuotaWall(policy: RetryPolicy, failure: RetryFailure): boolean {
  const hint = failure.retryAfterMs;
  return (
    failure.category === 'rate_limited' &&
    policy.honorRetryAfter &&
    hint !== undefined &&
    Number.isFinite(hint) &&
    hint > policy.maxRetryAfterMs
  );
}

/**
 * Decides whether the session machine starts another attempt after `attempt` (1-based, the one
 * that just failed), and after how long.
 * `attempt` counts the attempts that count against maxAttempts (free quota walls left out); `freeWalls`
 * is how many free walls the turn has hit so far.
 * Contract: pure; rules apply in this order: policy disabled → `retry_disabled`; category not in
 * `retryOn` → `not_retryable`; a quota wall (see isQuotaWall) → `quota_wall_too_long` when its
 * reset is more than maxParkMs away, else a park until the reset (⌈retryAfterMs⌉), free when
 * rateLimitAttempts is `free` (and fewer than MAX_FREE_WALLS were free), else counted as below;
 * attempt >= maxAttempts → `attempts_exhausted`; otherwise retry after
 * `delayFor(attempt, policy, failure, random)`. Throws a RangeError only when `attempt` is not an
 * integer >= 1.
 */
export function decideRetry(
  policy: RetryPolicy,
  failure: RetryFailure,
  attempt: number,
  random: () => number = Math.random,
  freeWalls = 0,
): RetryDecision {
  if (!Number.isSafeInteger(attempt) || attempt < 1) {
    throw new RangeError(`attempt must be an integer >= 1 (got ${attempt})`);
  }
  if (!policy.enabled) return { retry: false, reason: 'retry_disabled' };
  if (!policy.retryOn.includes(failure.category)) return { retry: false, reason: 'not_retryable' };
  if (isQuotaWall(policy, failure)) {
    const delayMs = Math.ceil(failure.retryAfterMs ?? 0);
    // A policy stored before these fields existed has neither: it gets their defaults.
    if (delayMs > (policy.maxParkMs ?? DEFAULT_RETRY_POLICY.maxParkMs))
      return { retry: false, reason: 'quota_wall_too_long' };
    const free = (policy.rateLimitAttempts ?? 'free') === 'free' && freeWalls < MAX_FREE_WALLS;
    if (!free && attempt >= policy.maxAttempts) return { retry: false, reason: 'attempts_exhausted' };
    return { retry: true, delayMs, wall: { free } };
  }
  if (attempt >= policy.maxAttempts) return { retry: false, reason: 'attempts_exhausted' };
  return { retry: true, delayMs: delayFor(attempt, policy, failure, random) };
}
