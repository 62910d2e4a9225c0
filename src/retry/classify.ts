import type { FailureCategory } from '../protocol/messages.ts';
import { delayFor, type RetryFailure } from './backoff.ts';
import type { RetryPolicy } from './policy.ts';

/**
 * Categories outside the default `retryOn`: with the default policy they are never retried,
 * whatever maxAttempts says. Retrying does not fix bad credentials, a rejected request, a binary
 * that will not start or output the mapper cannot read; `unknown` is excluded until understood.
 * A policy may still opt any of them in through `retryOn`.
 */
export const NEVER_RETRY_BY_DEFAULT = ['auth', 'bad_request', 'startup', 'invalid_output', 'quota', 'unknown'] as const satisfies readonly FailureCategory[];

export type NoRetryReason = 'retry_disabled' | 'not_retryable' | 'attempts_exhausted';

export type RetryDecision = { retry: true; delayMs: number } | { retry: false; reason: NoRetryReason };

/**
 * Decides whether the session machine starts another attempt after `attempt` (1-based, the one
 * that just failed), and after how long.
 * Contract: pure; rules apply in this order: policy disabled → `retry_disabled`; category not in
 * `retryOn` → `not_retryable`; attempt >= maxAttempts → `attempts_exhausted`; otherwise retry
 * after `delayFor(attempt, policy, failure, random)`. Throws a RangeError only when `attempt` is
 * not an integer >= 1.
 */
export function decideRetry(policy: RetryPolicy, failure: RetryFailure, attempt: number, random: () => number = Math.random): RetryDecision {
  if (!Number.isSafeInteger(attempt) || attempt < 1) {
    throw new RangeError(`attempt must be an integer >= 1 (got ${attempt})`);
  }
  if (!policy.enabled) return { retry: false, reason: 'retry_disabled' };
  if (!policy.retryOn.includes(failure.category)) return { retry: false, reason: 'not_retryable' };
  if (attempt >= policy.maxAttempts) return { retry: false, reason: 'attempts_exhausted' };
  return { retry: true, delayMs: delayFor(attempt, policy, failure, random) };
}
