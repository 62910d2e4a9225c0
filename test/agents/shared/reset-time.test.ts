import { describe, expect, it } from 'vitest';
import { classifyErrorText, resetAfterMsOf } from '../../../src/agents/shared/classify-error-text.ts';

// 2026-01-01 01:30 UTC (02:30 in Berlin, winter time: UTC+1).
const now = Date.UTC(2026, 0, 1, 1, 30);
const HOUR = 3_600_000;

describe('a reset time named in a rate-limit error', () => {
  it.each([
    ["You've hit your limit · resets 4am (UTC)", 2.5 * HOUR],
    ['5-hour limit reached ∙ resets 4:30am (UTC)', 3 * HOUR],
    ["You've hit your limit · resets 4am (Europe/Berlin)", 1.5 * HOUR],
    // Already past today: tomorrow's.
    ['limit reached, resets at 1am (UTC)', 23.5 * HOUR],
    ['usage limit, resets 13:00 (UTC)', 11.5 * HOUR],
    ['Claude AI usage limit reached|1767234600', 1 * HOUR],
    ['429 rate limited; x-ratelimit-reset-requests: 6m0s', 6 * 60_000],
    ['429 rate limited; x-ratelimit-reset: 1767234600', 1 * HOUR],
    ['429 anthropic-ratelimit-unified-reset: 2026-01-01T03:30:00Z', 2 * HOUR],
  ])('%s → %d ms', (text, ms) => {
    expect(resetAfterMsOf(text, now)).toBe(ms);
  });

  it.each(['resets 5 times', 'no reset here', 'resets 25:00 (UTC)', 'x-ratelimit-reset: 2020-01-01T00:00:00Z'])(
    '%s → nothing',
    (text) => {
      expect(resetAfterMsOf(text, now)).toBeUndefined();
    },
  );

  it('makes Claude Code\'s "hit your limit" a rate limit with the reset as its Retry-After', () => {
    expect(classifyErrorText("You've hit your limit · resets 4am (UTC)", now)).toEqual({
      category: 'rate_limited',
      retryAfterMs: 2.5 * HOUR,
    });
  });

  it('a Retry-After in the same text wins over a reset time', () => {
    expect(classifyErrorText('429 Too Many Requests retry-after: 30 x-ratelimit-reset: 1767234600', now)).toEqual({
      category: 'rate_limited',
      status: 429,
      retryAfterMs: 30_000,
    });
  });

  it('reads hours in "try again in"', () => {
    expect(classifyErrorText('rate limit exceeded, try again in 2 hours', now)).toEqual({
      category: 'rate_limited',
      retryAfterMs: 2 * HOUR,
    });
  });
});
