import { z } from 'zod';
import { FAILURE_CATEGORIES, type FailureCategory } from '../protocol/messages.ts';

/**
 * The retry policy: how often and how patiently the session machine retries a failed attempt.
 * Contract: `RetryPolicySchema` is the only definition; a parsed policy is frozen, complete and
 * JSON-serialisable (it is stored in the machine's snapshot).
 */

const DEFAULT_RETRY_ON = [
  'network',
  'timeout',
  'rate_limited',
  'server_error',
  'process_crash',
] as const satisfies readonly FailureCategory[];

/** The longest `maxTurnMs` (7 days): below the 2^31-1 ms a timer can wait. */
export const MAX_TURN_MS = 604_800_000;

/** The longest `maxParkMs` (7 days): a park is a machine timer too, and stays below the 2^31-1 ms a timer can wait. */
export const MAX_PARK_MS = 604_800_000;

/** Whether an attempt that ended on a quota wall counts against `maxAttempts`. */
export const RATE_LIMIT_ATTEMPTS = ['free', 'counted'] as const;

/** What a failed attempt leaves in a session's workspace for the retry. */
export const WORKSPACE_ON_FAILURE = ['keep', 'rollback'] as const;

const JITTER_MODES = ['none', 'full', 'equal'] as const;

// Every check of a field carries the same rule text, so errors read the same whatever check failed.
function intRange(min: number, max: number) {
  const error = `must be an integer from ${min} to ${max}`;
  return z.int({ error }).min(min, { error }).max(max, { error });
}

function numberRange(min: number, max: number, error = `must be a number from ${min} to ${max}`) {
  return z.number({ error }).min(min, { error }).max(max, { error });
}

const boolean = () => z.boolean({ error: 'must be true or false' });

const jitterRule = `must be ${JITTER_MODES.map((m) => `'${m}'`).join(', ')} or a number from 0 to 1`;
const categoryRule = `must be one of ${FAILURE_CATEGORIES.join(', ')}`;

export const RetryPolicySchema = z
  .strictObject({
    enabled: boolean().default(true),
    /** Attempts in total, the first one included. */
    maxAttempts: intRange(1, 100).default(4),
    initialDelayMs: intRange(0, 3_600_000).default(1000),
    multiplier: numberRange(1, 10).default(2),
    maxDelayMs: intRange(0, 86_400_000).default(60_000),
    jitter: z
      .union([z.enum(JITTER_MODES, { error: jitterRule }), numberRange(0, 1, jitterRule)], { error: jitterRule })
      .default('equal'),
    /** Failure categories worth another attempt; empty means never retry. */
    retryOn: z
      .array(z.enum(FAILURE_CATEGORIES, { error: categoryRule }), {
        error: 'must be an array of failure categories',
      })
      .superRefine((categories, ctx) => {
        const repeated = categories.find((c, i) => categories.indexOf(c) !== i);
        if (repeated !== undefined) {
          ctx.addIssue({ code: 'custom', input: categories, message: `must not list "${repeated}" twice` });
        }
      })
      .default(() => [...DEFAULT_RETRY_ON])
      .readonly(),
    /** Wait at least as long as the server's Retry-After, capped at maxRetryAfterMs. */
    honorRetryAfter: boolean().default(true),
    maxRetryAfterMs: intRange(0, 86_400_000).default(600_000),
    /** Wall-clock limit of one turn, its attempts and backoffs included (0: none); the deployment's maxTurnMs caps it. */
    maxTurnMs: intRange(0, MAX_TURN_MS).default(0),
    /**
     * A rate limit whose reset (Retry-After or a recognised reset time) lies past maxRetryAfterMs is a
     * quota wall: the session is parked until the reset. `free`: that attempt does not count against
     * maxAttempts; `counted`: it does (the deployment may force `counted`).
     */
    rateLimitAttempts: z
      .enum(RATE_LIMIT_ATTEMPTS, { error: `must be ${RATE_LIMIT_ATTEMPTS.map((m) => `'${m}'`).join(' or ')}` })
      .default('free'),
    /** The longest park at a quota wall; a reset further away ends the turn failed (`quota_wall_too_long`). 0: never park. The deployment's maxParkMs caps it. */
    maxParkMs: intRange(0, MAX_PARK_MS).default(86_400_000),
    /**
     * What a failed attempt leaves for the retry, in a session with a workspace (docs/workspaces.md):
     * `keep` the files and conversation of its completed tool calls; `rollback` neither (the whole
     * attempt undone, the prompt sent again).
     */
    workspace: z
      .enum(WORKSPACE_ON_FAILURE, {
        error: `must be ${WORKSPACE_ON_FAILURE.map((m) => `'${m}'`).join(' or ')}`,
      })
      .default('keep'),
  })
  .superRefine((policy, ctx) => {
    // Compare only two valid delays; a bad one is already reported on its own.
    const delayInvalid = ctx.issues.some((issue) => ['initialDelayMs', 'maxDelayMs'].includes(String(issue.path?.[0])));
    if (!delayInvalid && policy.maxDelayMs < policy.initialDelayMs) {
      ctx.addIssue({
        code: 'custom',
        path: ['maxDelayMs'],
        input: policy.maxDelayMs,
        message: `must be at least initialDelayMs, ${policy.initialDelayMs}`,
      });
    }
  })
  .readonly();

export type RetryPolicy = z.output<typeof RetryPolicySchema>;
export type RetryPolicyInput = z.input<typeof RetryPolicySchema>;

export const RETRY_POLICY_FIELDS = Object.keys(RetryPolicySchema.unwrap().shape) as ReadonlyArray<keyof RetryPolicy>;

export const DEFAULT_RETRY_POLICY: RetryPolicy = RetryPolicySchema.parse({});

export interface RetryPolicyError {
  /** The top-level policy field at fault, or `policy` when the input is not an object. */
  field: string;
  /** Names the field, the rule and the offending value, e.g. `maxAttempts: must be an integer from 1 to 100 (got 0)`. */
  message: string;
}

export type RetryPolicyResult = { ok: true; policy: RetryPolicy } | { ok: false; errors: RetryPolicyError[] };

/**
 * Validates a full policy; absent fields take their defaults.
 * Contract: never throws; on failure every error names its field.
 */
export function parseRetryPolicy(input: unknown): RetryPolicyResult {
  const result = RetryPolicySchema.safeParse(input, { reportInput: true });
  if (result.success) return { ok: true, policy: result.data };
  return { ok: false, errors: result.error.issues.flatMap(toPolicyErrors) };
}

/**
 * Applies a partial override to `base`; fields absent or `undefined` in `patch` keep their base value.
 * Contract: never throws; the merged policy is validated as a whole, and on any error nothing is
 * applied (`base` is never modified) and the errors are returned.
 */
export function mergeRetryPolicy(base: RetryPolicy, patch: unknown): RetryPolicyResult {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) {
    return {
      ok: false,
      errors: [{ field: 'policy', message: `policy: must be an object (got ${describeValue(patch)})` }],
    };
  }
  const given = Object.entries(patch).filter(([, value]) => value !== undefined);
  // fromEntries keeps a `__proto__` key as an own field, so the strict schema rejects it.
  return parseRetryPolicy(Object.fromEntries([...Object.entries(base), ...given]));
}

function toPolicyErrors(issue: z.core.$ZodIssue): RetryPolicyError[] {
  if (issue.code === 'unrecognized_keys') {
    const known = RETRY_POLICY_FIELDS.join(', ');
    // A key that is empty or not a plain name is shown quoted, so the message still names it.
    return issue.keys.map((key) => {
      const name = /^[A-Za-z_$][\w$]*$/.test(key) ? key : JSON.stringify(key);
      return { field: name, message: `${name}: unknown field (known fields: ${known})` };
    });
  }
  const [head, ...rest] = issue.path;
  if (head === undefined) {
    return [{ field: 'policy', message: `policy: must be an object (got ${describeValue(issue.input)})` }];
  }
  const where = String(head) + rest.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('');
  return [{ field: String(head), message: `${where}: ${issue.message} (got ${describeValue(issue.input)})` }];
}

/** A short, never-throwing rendering of any value for error messages. */
function describeValue(value: unknown): string {
  switch (typeof value) {
    case 'undefined':
      return 'nothing';
    case 'number':
    case 'boolean':
      return String(value);
    case 'bigint':
      return `${value}n`;
    case 'symbol':
      return 'a symbol';
    case 'function':
      return 'a function';
    case 'string':
      return truncate(JSON.stringify(value));
    default:
      if (value === null) return 'null';
      try {
        const json = JSON.stringify(value);
        if (json !== undefined) return truncate(json);
      } catch {
        // Cycles, bigints or throwing getters: fall back to the kind of value.
      }
      return Array.isArray(value) ? 'an array' : 'an object';
  }
}

function truncate(text: string, max = 60): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
