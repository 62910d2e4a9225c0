export {
  DEFAULT_RETRY_POLICY,
  MAX_PARK_MS,
  RATE_LIMIT_ATTEMPTS,
  RETRY_POLICY_FIELDS,
  RetryPolicySchema,
  mergeRetryPolicy,
  parseRetryPolicy,
  type RetryPolicy,
  type RetryPolicyError,
  type RetryPolicyInput,
  type RetryPolicyResult,
} from './policy.ts';
export { baseDelay, delayFor, type RetryFailure } from './backoff.ts';
export {
  MAX_FREE_WALLS,
  NEVER_RETRY_BY_DEFAULT,
  decideRetry,
  isQuotaWall,
  type NoRetryReason,
  type RetryDecision,
} from './classify.ts';
