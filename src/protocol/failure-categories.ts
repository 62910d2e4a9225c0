/**
 * Why an attempt failed, as every agent's failure mapping names it (the retry policy's
 * `retryOn` is a list of these). A plain list, without zod, for the CLI's flag choices and help:
 * `FailureCategorySchema` (messages.ts) is made from it.
 */
export const FAILURE_CATEGORIES = [
  'network',
  'timeout',
  'rate_limited',
  'server_error',
  'auth',
  'bad_request',
  'process_crash',
  'startup',
  'invalid_output',
  /** A deployment limit was reached (e.g. the session's message log is full): sessiond ended the attempt. */
  'quota',
  'unknown',
] as const;

export type FailureCategory = (typeof FAILURE_CATEGORIES)[number];
