import { describe, expect, it } from 'vitest';
import * as retry from '../../src/retry/index.ts';

describe('src/retry index', () => {
  it('re-exports the policy, backoff and decision functions', () => {
    expect(Object.keys(retry).sort()).toEqual(
      [
        'DEFAULT_RETRY_POLICY',
        'NEVER_RETRY_BY_DEFAULT',
        'RETRY_POLICY_FIELDS',
        'RetryPolicySchema',
        'baseDelay',
        'decideRetry',
        'delayFor',
        'mergeRetryPolicy',
        'parseRetryPolicy',
      ].sort(),
    );
  });
});
