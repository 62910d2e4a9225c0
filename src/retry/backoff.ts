import type { TerminalFailedContent } from '../protocol/messages.ts';
import type { RetryPolicy } from './policy.ts';

/** What the retry decision needs to know about a failed attempt. */
export type RetryFailure = Pick<TerminalFailedContent, 'category' | 'retryAfterMs'>;

/**
 * Milliseconds to wait after attempt `attempt` (1-based, the attempt that just failed) before the next.
 *
 * Contract: pure; returns a finite, non-negative integer for any policy accepted by
 * `parseRetryPolicy`; throws a RangeError only when `attempt` is not an integer >= 1.
 *
 * Bounds (every result is an integer inside its interval; r = random(), clamped to [0, 1]):
 * - base = min(maxDelayMs, initialDelayMs × multiplier^(attempt − 1)), rounded to the nearest ms.
 *   It never decreases as `attempt` grows and saturates at maxDelayMs instead of overflowing.
 * - jitter 'none'  → exactly base.
 * - jitter 'full'  → r × base, within [0, base].
 * - jitter 'equal' → base/2 + r × base/2, within [base/2, base].
 * - jitter f (0..1) → base × (1 − f × r), within [base × (1 − f), base]; f = 0 adds no
 *   jitter, f = 1 spans [0, base] like 'full'.
 * - Retry-After: when honorRetryAfter is on and failure.retryAfterMs is a finite number above the
 *   jittered delay, the delay becomes min(⌈retryAfterMs⌉, maxRetryAfterMs), but never less than the
 *   jittered delay: a server hint can lengthen the wait, not shorten it.
 * - Overall: 0 ≤ delay ≤ max(maxDelayMs, min(⌈retryAfterMs⌉, maxRetryAfterMs)).
 */
export function delayFor(
  attempt: number,
  policy: RetryPolicy,
  failure: RetryFailure,
  random: () => number = Math.random,
): number {
  const jittered = applyJitter(baseDelay(attempt, policy), policy.jitter, random);
  const hint = failure.retryAfterMs;
  if (!policy.honorRetryAfter || hint === undefined || !Number.isFinite(hint) || hint <= jittered) return jittered;
  return Math.max(jittered, Math.min(Math.ceil(hint), policy.maxRetryAfterMs));
}

/** The delay before jitter: exponential growth from initialDelayMs, capped at maxDelayMs. */
export function baseDelay(attempt: number, policy: RetryPolicy): number {
  if (!Number.isSafeInteger(attempt) || attempt < 1) {
    throw new RangeError(`attempt must be an integer >= 1 (got ${attempt})`);
  }
  const { initialDelayMs, multiplier, maxDelayMs } = policy;
  if (initialDelayMs === 0) return 0;
  const raw = initialDelayMs * multiplier ** (attempt - 1);
  // Large attempts overflow to Infinity, which the comparison below also catches.
  return raw >= maxDelayMs ? maxDelayMs : Math.round(raw);
}

function applyJitter(base: number, jitter: RetryPolicy['jitter'], random: () => number): number {
  if (jitter === 'none' || base === 0) return base;
  const r = clampUnit(random());
  const [value, lower] =
    jitter === 'full'
      ? [r * base, 0]
      : jitter === 'equal'
        ? [base / 2 + (r * base) / 2, base / 2]
        : [base * (1 - jitter * r), base * (1 - jitter)];
  // Rounding may step below the interval when its lower end is fractional; clamp back in.
  return Math.min(base, Math.max(Math.ceil(lower), Math.round(value)));
}

function clampUnit(x: number): number {
  return Number.isNaN(x) ? 0 : Math.min(1, Math.max(0, x));
}
