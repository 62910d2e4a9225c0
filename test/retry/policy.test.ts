import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_RETRY_POLICY,
  RETRY_POLICY_FIELDS,
  RetryPolicySchema,
  mergeRetryPolicy,
  parseRetryPolicy,
  type RetryPolicyResult,
} from '../../src/retry/policy.ts';
import { policyWith, validPolicyArb } from './fixtures.ts';

const CATEGORY_RULE =
  'must be one of network, timeout, rate_limited, server_error, auth, bad_request, process_crash, startup, invalid_output, quota, unknown';
const JITTER_RULE = "must be 'none', 'full', 'equal' or a number from 0 to 1";
const KNOWN_FIELDS =
  'enabled, maxAttempts, initialDelayMs, multiplier, maxDelayMs, jitter, retryOn, honorRetryAfter, maxRetryAfterMs, maxTurnMs, rateLimitAttempts, maxParkMs, workspace';

function errorsOf(result: RetryPolicyResult) {
  if (result.ok) throw new Error(`expected errors, got policy ${JSON.stringify(result.policy)}`);
  return result.errors;
}

describe('DEFAULT_RETRY_POLICY', () => {
  it('holds the documented defaults', () => {
    expect(DEFAULT_RETRY_POLICY).toEqual({
      enabled: true,
      maxAttempts: 4,
      initialDelayMs: 1000,
      multiplier: 2,
      maxDelayMs: 60_000,
      jitter: 'equal',
      retryOn: ['network', 'timeout', 'rate_limited', 'server_error', 'process_crash'],
      honorRetryAfter: true,
      maxRetryAfterMs: 600_000,
      maxTurnMs: 0,
      rateLimitAttempts: 'free',
      maxParkMs: 86_400_000,
      workspace: 'keep',
    });
  });

  it('is frozen, down to retryOn', () => {
    expect(Object.isFrozen(DEFAULT_RETRY_POLICY)).toBe(true);
    expect(Object.isFrozen(DEFAULT_RETRY_POLICY.retryOn)).toBe(true);
  });

  it('lists every schema field in RETRY_POLICY_FIELDS', () => {
    expect([...RETRY_POLICY_FIELDS].sort()).toEqual(Object.keys(DEFAULT_RETRY_POLICY).sort());
  });
});

describe('parseRetryPolicy', () => {
  it('fills every absent field with its default', () => {
    expect(parseRetryPolicy({})).toEqual({ ok: true, policy: DEFAULT_RETRY_POLICY });
    expect(parseRetryPolicy({ maxAttempts: 7 })).toEqual({
      ok: true,
      policy: { ...DEFAULT_RETRY_POLICY, maxAttempts: 7 },
    });
  });

  it('returns a frozen policy whose default retryOn is not shared between results', () => {
    const a = policyWith();
    const b = policyWith();
    expect(Object.isFrozen(a)).toBe(true);
    expect(Object.isFrozen(a.retryOn)).toBe(true);
    expect(a.retryOn).not.toBe(b.retryOn);
  });

  it.each([
    ['enabled', true],
    ['enabled', false],
    ['maxAttempts', 1],
    ['maxAttempts', 100],
    ['initialDelayMs', 0],
    ['multiplier', 1],
    ['multiplier', 1.5],
    ['multiplier', 10],
    ['maxDelayMs', 1000],
    ['maxDelayMs', 86_400_000],
    ['jitter', 'none'],
    ['jitter', 'full'],
    ['jitter', 'equal'],
    ['jitter', 0],
    ['jitter', 0.3],
    ['jitter', 1],
    ['retryOn', []],
    ['retryOn', ['auth']],
    ['honorRetryAfter', false],
    ['maxRetryAfterMs', 0],
    ['maxRetryAfterMs', 86_400_000],
    ['maxTurnMs', 0],
    ['maxTurnMs', 604_800_000],
    ['rateLimitAttempts', 'counted'],
    ['maxParkMs', 0],
    ['maxParkMs', 604_800_000],
    ['workspace', 'rollback'],
  ] as const)('accepts %s = %j', (field, value) => {
    const result = parseRetryPolicy({ [field]: value });
    expect(result.ok && result.policy[field]).toEqual(value);
  });

  it('accepts initialDelayMs up to 1 hour when maxDelayMs is at least as large', () => {
    expect(parseRetryPolicy({ initialDelayMs: 3_600_000, maxDelayMs: 3_600_000 }).ok).toBe(true);
  });

  it.each([
    ['enabled', 'yes', 'enabled: must be true or false (got "yes")'],
    ['maxAttempts', 0, 'maxAttempts: must be an integer from 1 to 100 (got 0)'],
    ['maxAttempts', 101, 'maxAttempts: must be an integer from 1 to 100 (got 101)'],
    ['maxAttempts', 2.5, 'maxAttempts: must be an integer from 1 to 100 (got 2.5)'],
    ['maxAttempts', '3', 'maxAttempts: must be an integer from 1 to 100 (got "3")'],
    ['maxAttempts', null, 'maxAttempts: must be an integer from 1 to 100 (got null)'],
    ['initialDelayMs', -1, 'initialDelayMs: must be an integer from 0 to 3600000 (got -1)'],
    ['initialDelayMs', 3_600_001, 'initialDelayMs: must be an integer from 0 to 3600000 (got 3600001)'],
    ['multiplier', 0.5, 'multiplier: must be a number from 1 to 10 (got 0.5)'],
    ['multiplier', 11, 'multiplier: must be a number from 1 to 10 (got 11)'],
    ['multiplier', Number.NaN, 'multiplier: must be a number from 1 to 10 (got NaN)'],
    ['multiplier', Number.POSITIVE_INFINITY, 'multiplier: must be a number from 1 to 10 (got Infinity)'],
    ['maxDelayMs', 86_400_001, 'maxDelayMs: must be an integer from 0 to 86400000 (got 86400001)'],
    ['maxDelayMs', 999, 'maxDelayMs: must be at least initialDelayMs, 1000 (got 999)'],
    ['jitter', 'random', `jitter: ${JITTER_RULE} (got "random")`],
    ['jitter', 1.5, `jitter: ${JITTER_RULE} (got 1.5)`],
    ['jitter', -0.1, `jitter: ${JITTER_RULE} (got -0.1)`],
    ['jitter', true, `jitter: ${JITTER_RULE} (got true)`],
    ['retryOn', 'network', 'retryOn: must be an array of failure categories (got "network")'],
    ['retryOn', ['network', 'cosmic_ray'], `retryOn[1]: ${CATEGORY_RULE} (got "cosmic_ray")`],
    [
      'retryOn',
      ['timeout', 'network', 'timeout'],
      'retryOn: must not list "timeout" twice (got ["timeout","network","timeout"])',
    ],
    ['honorRetryAfter', 1, 'honorRetryAfter: must be true or false (got 1)'],
    ['maxRetryAfterMs', -5, 'maxRetryAfterMs: must be an integer from 0 to 86400000 (got -5)'],
    ['maxRetryAfterMs', 10n, 'maxRetryAfterMs: must be an integer from 0 to 86400000 (got 10n)'],
    ['maxTurnMs', 604_800_001, 'maxTurnMs: must be an integer from 0 to 604800000 (got 604800001)'],
    ['rateLimitAttempts', 'sometimes', `rateLimitAttempts: must be 'free' or 'counted' (got "sometimes")`],
    ['maxParkMs', 604_800_001, 'maxParkMs: must be an integer from 0 to 604800000 (got 604800001)'],
    ['maxParkMs', -1, 'maxParkMs: must be an integer from 0 to 604800000 (got -1)'],
    ['workspace', 'undo', `workspace: must be 'keep' or 'rollback' (got "undo")`],
  ])('rejects %s = %s, naming the field and the allowed range', (field, value, message) => {
    expect(errorsOf(parseRetryPolicy({ [field]: value }))).toEqual([{ field, message }]);
  });

  it('rejects each unknown field by name, listing the known ones', () => {
    expect(errorsOf(parseRetryPolicy({ maxAttempts: 2, maxRetries: 3, backoff: 'exp' }))).toEqual([
      { field: 'maxRetries', message: `maxRetries: unknown field (known fields: ${KNOWN_FIELDS})` },
      { field: 'backoff', message: `backoff: unknown field (known fields: ${KNOWN_FIELDS})` },
    ]);
  });

  it('rejects a __proto__ key as an unknown field', () => {
    expect(errorsOf(parseRetryPolicy(JSON.parse('{"__proto__": {"maxAttempts": 50}}')))).toEqual([
      { field: '__proto__', message: `__proto__: unknown field (known fields: ${KNOWN_FIELDS})` },
    ]);
  });

  it.each([
    [null, 'null'],
    [undefined, 'nothing'],
    [[], '[]'],
    [42, '42'],
    ['retry', '"retry"'],
  ])('rejects %j as a whole with field "policy"', (input, got) => {
    expect(errorsOf(parseRetryPolicy(input))).toEqual([
      { field: 'policy', message: `policy: must be an object (got ${got})` },
    ]);
  });

  it('reports every invalid field at once', () => {
    const fields = errorsOf(parseRetryPolicy({ maxAttempts: 0, jitter: 'x', extra: 1 })).map((e) => e.field);
    expect(fields.sort()).toEqual(['extra', 'jitter', 'maxAttempts']);
  });

  it('shortens long offending values in messages', () => {
    const [error] = errorsOf(parseRetryPolicy({ jitter: 'x'.repeat(500) }));
    expect(error?.message.length).toBeLessThan(200);
  });

  it('never throws and either returns a policy that re-validates or errors naming a field', () => {
    const fieldValue = fc.oneof(fc.anything(), fc.integer(), fc.double(), fc.constantFrom('none', 'full', 'equal'));
    const policyLike = fc.dictionary(fc.oneof(fc.constantFrom(...RETRY_POLICY_FIELDS), fc.string()), fieldValue, {
      maxKeys: 4,
    });
    fc.assert(
      fc.property(fc.oneof(fc.anything(), policyLike), (input) => {
        const result = parseRetryPolicy(input);
        if (result.ok) {
          expect(parseRetryPolicy(result.policy)).toEqual(result);
          expect(RetryPolicySchema.safeParse(result.policy).success).toBe(true);
          return;
        }
        expect(result.errors.length).toBeGreaterThan(0);
        // An unknown key that is empty or not a plain name is named quoted.
        const ownKeys =
          typeof input === 'object' && input !== null ? Object.keys(input).flatMap((k) => [k, JSON.stringify(k)]) : [];
        for (const { field, message } of result.errors) {
          expect([...RETRY_POLICY_FIELDS, 'policy', ...ownKeys]).toContain(field);
          expect(message.startsWith(field)).toBe(true);
        }
      }),
      { numRuns: 2000 },
    );
  });
});

describe('mergeRetryPolicy', () => {
  it('overrides only the fields the patch names', () => {
    expect(mergeRetryPolicy(DEFAULT_RETRY_POLICY, { maxAttempts: 2, jitter: 'none' })).toEqual({
      ok: true,
      policy: { ...DEFAULT_RETRY_POLICY, maxAttempts: 2, jitter: 'none' },
    });
  });

  it('keeps the base value for fields set to undefined', () => {
    const base = policyWith({ maxAttempts: 9 });
    expect(mergeRetryPolicy(base, { maxAttempts: undefined })).toEqual({ ok: true, policy: base });
  });

  it('replaces retryOn as a whole rather than appending', () => {
    const result = mergeRetryPolicy(DEFAULT_RETRY_POLICY, { retryOn: ['auth'] });
    expect(result.ok && result.policy.retryOn).toEqual(['auth']);
  });

  it('validates the merged result across fields', () => {
    const base = policyWith({ initialDelayMs: 1000, maxDelayMs: 2000 });
    expect(errorsOf(mergeRetryPolicy(base, { initialDelayMs: 5000 }))).toEqual([
      { field: 'maxDelayMs', message: 'maxDelayMs: must be at least initialDelayMs, 5000 (got 2000)' },
    ]);
    expect(mergeRetryPolicy(base, { initialDelayMs: 5000, maxDelayMs: 5000 }).ok).toBe(true);
  });

  it('applies nothing when any field of the patch is invalid', () => {
    const base = policyWith({ maxAttempts: 3 });
    const result = mergeRetryPolicy(base, { maxAttempts: 5, multiplier: 0 });
    expect(errorsOf(result)).toEqual([
      { field: 'multiplier', message: 'multiplier: must be a number from 1 to 10 (got 0)' },
    ]);
    expect(base.maxAttempts).toBe(3);
  });

  it('rejects unknown fields and __proto__ in the patch', () => {
    expect(errorsOf(mergeRetryPolicy(DEFAULT_RETRY_POLICY, { retries: 3 })).map((e) => e.field)).toEqual(['retries']);
    expect(
      errorsOf(mergeRetryPolicy(DEFAULT_RETRY_POLICY, JSON.parse('{"__proto__": {"enabled": false}}'))).map(
        (e) => e.field,
      ),
    ).toEqual(['__proto__']);
  });

  it.each([null, undefined, [], 'maxAttempts=3', 3])('rejects a patch that is not an object: %j', (patch) => {
    const [error] = errorsOf(mergeRetryPolicy(DEFAULT_RETRY_POLICY, patch));
    expect(error?.field).toBe('policy');
    expect(error?.message).toMatch(/^policy: must be an object \(got /);
  });

  it('never changes the base, and applies a valid patch exactly', () => {
    fc.assert(
      fc.property(
        validPolicyArb,
        fc.oneof(fc.anything(), fc.dictionary(fc.constantFrom(...RETRY_POLICY_FIELDS), fc.anything())),
        (base, patch) => {
          const before = structuredClone(base);
          const result = mergeRetryPolicy(base, patch);
          expect(base).toEqual(before);
          if (!result.ok) return;
          for (const field of RETRY_POLICY_FIELDS) {
            const patched = (patch as Record<string, unknown>)[field];
            expect(result.policy[field]).toEqual(patched === undefined ? base[field] : patched);
          }
        },
      ),
      { numRuns: 1000 },
    );
  });
});
