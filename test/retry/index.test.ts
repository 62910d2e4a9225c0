import { describe, expect, it } from 'vitest';
import * as retry from '../../src/retry/index.ts';

describe('src/retry index', () => {
  it('re-exports the policy, backoff and decision functions', () => {
    expect(Object.keys(retry).sort()).toEqual(
      [
        'DEFAULT_RETRY_POLICY',
        'MAX_FREE_WALLS',
        'MAX_PARK_MS',
        'NEVER_RETRY_BY_DEFAULT',
        'RATE_LIMIT_ATTEMPTS',
        'RETRY_POLICY_FIELDS',
        'RetryPolicySchema',
        'baseDelay',
        'decideRetry',
        'delayFor',
        'isQuotaWall',
        'mergeRetryPolicy',
        'parseRetryPolicy',
      ].sort(),
    );
  });
});
