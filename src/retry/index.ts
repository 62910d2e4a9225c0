export {
  DEFAULT_RETRY_POLICY,
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
export { NEVER_RETRY_BY_DEFAULT, decideRetry, type NoRetryReason, type RetryDecision } from './classify.ts';
