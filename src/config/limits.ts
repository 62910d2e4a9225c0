import { z } from 'zod';
import { derivedName, type LimitRule } from './limit-rules.ts';

export {
  derivedName,
  limitKeysFor,
  MATCH_FIELDS,
  type LimitKey,
  type LimitRule,
  type MatchField,
  type MatchValues,
} from './limit-rules.ts';

/**
 * Fleet-wide limits (SESSIOND_LIMITS, `limits` in the config file): each matches sessions by the
 * agent, provider and model of the attempt, the `account` label the operator gave the agent's host
 * options, and the caller's `tenant`; `*` means one limit per distinct value. Each caps attempts in
 * flight (`maxConcurrent`), attempt starts per minute (`maxStartsPerMinute`) and/or tokens per
 * minute (`maxTokensPerMinute`, counted from the usage of the attempts that ended).
 */

const matchValue = z.string().min(1, 'must not be empty').max(200, 'must be at most 200 characters');

export const LimitSchema = z
  .strictObject({
    /** The limit's name (`sessiond pause --limit NAME`, `POST /api/dispatch/pause`); default: derived from its match. */
    name: z
      .string()
      .regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must be 1-64 letters, digits or _.-')
      .optional(),
    /** Which sessions it applies to, by the attempt's agent, provider and model, the `account` label of the agent's host options, and the caller's `tenant`; `*`: one limit per distinct value; absent: any. */
    match: z
      .strictObject({
        agent: matchValue.optional(),
        provider: matchValue.optional(),
        model: matchValue.optional(),
        account: matchValue.optional(),
        tenant: matchValue.optional(),
      })
      .prefault({}),
    /** Attempts in flight at once under this limit. */
    maxConcurrent: z
      .number({ error: 'must be an integer from 1 to 100000' })
      .int('must be an integer from 1 to 100000')
      .min(1, 'must be an integer from 1 to 100000')
      .max(100_000, 'must be an integer from 1 to 100000')
      .optional(),
    /** Attempt starts per minute under this limit. */
    maxStartsPerMinute: z
      .number({ error: 'must be an integer from 1 to 1000000' })
      .int('must be an integer from 1 to 1000000')
      .min(1, 'must be an integer from 1 to 1000000')
      .max(1_000_000, 'must be an integer from 1 to 1000000')
      .optional(),
    /** Tokens per minute under this limit, counted from the usage of the attempts that ended. */
    maxTokensPerMinute: z
      .number({ error: 'must be an integer from 1 to 1000000000' })
      .int('must be an integer from 1 to 1000000000')
      .min(1, 'must be an integer from 1 to 1000000000')
      .max(1_000_000_000, 'must be an integer from 1 to 1000000000')
      .optional(),
  })
  .refine(
    (limit) =>
      limit.maxConcurrent !== undefined ||
      limit.maxStartsPerMinute !== undefined ||
      limit.maxTokensPerMinute !== undefined,
    {
      message: 'a limit needs maxConcurrent, maxStartsPerMinute and/or maxTokensPerMinute',
      path: ['maxConcurrent'],
    },
  );

export const LimitsSchema = z
  .array(LimitSchema)
  .max(100, 'at most 100 limits')
  .transform((limits, ctx): LimitRule[] => {
    const rules = limits.map((l) => ({
      name: l.name ?? derivedName(l.match),
      match: l.match,
      maxConcurrent: l.maxConcurrent ?? 0,
      maxStartsPerMinute: l.maxStartsPerMinute ?? 0,
      maxTokensPerMinute: l.maxTokensPerMinute ?? 0,
    }));
    const seen = new Set<string>();
    rules.forEach((rule, i) => {
      if (seen.has(rule.name))
        ctx.addIssue({
          code: 'custom',
          path: [i, 'name'],
          message: `"${rule.name}" names two limits: give each a unique name`,
        });
      seen.add(rule.name);
    });
    return rules;
  });

export type LimitsResult =
  { ok: true; limits: LimitRule[] } | { ok: false; errors: Array<{ field: string; message: string }> };

/** Parses a list of limits (JSON text or a value); errors name the field (`limits.1.maxConcurrent: …`). */
export function parseLimits(input: unknown, field = 'limits'): LimitsResult {
  let value = input;
  if (typeof input === 'string') {
    try {
      value = JSON.parse(input) as unknown;
    } catch {
      // The error says what is wrong, naming the field.
      return {
        ok: false,
        errors: [
          {
            field,
            message: 'must be a JSON array of limits, e.g. [{"match":{"provider":"anthropic"},"maxConcurrent":20}]',
          },
        ],
      };
    }
  }
  const parsed = LimitsSchema.safeParse(value);
  if (parsed.success) return { ok: true, limits: parsed.data };
  return {
    ok: false,
    errors: parsed.error.issues.map((i) => ({ field: [field, ...i.path.map(String)].join('.'), message: i.message })),
  };
}
