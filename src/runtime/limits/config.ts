import { z } from 'zod';

/**
 * Fleet-wide limits (SESSIOND_LIMITS, `limits` in the config file): each matches sessions by the
 * agent, provider and model of the attempt, the `account` label the operator gave the agent's host
 * options, and the caller's `tenant`; `*` means one limit per distinct value. Each caps attempts in
 * flight (`maxConcurrent`), attempt starts per minute (`maxStartsPerMinute`) and/or tokens per
 * minute (`maxTokensPerMinute`, counted from the usage of the attempts that ended).
 */
export const MATCH_FIELDS = ['agent', 'provider', 'model', 'account', 'tenant'] as const;
export type MatchField = (typeof MATCH_FIELDS)[number];

const matchValue = z.string().min(1, 'must not be empty').max(200, 'must be at most 200 characters');

export const LimitSchema = z
  .strictObject({
    name: z
      .string()
      .regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must be 1-64 letters, digits or _.-')
      .optional(),
    match: z
      .strictObject({ agent: matchValue.optional(), provider: matchValue.optional(), model: matchValue.optional(), account: matchValue.optional(), tenant: matchValue.optional() })
      .prefault({}),
    maxConcurrent: z
      .number({ error: 'must be an integer from 1 to 100000' })
      .int('must be an integer from 1 to 100000')
      .min(1, 'must be an integer from 1 to 100000')
      .max(100_000, 'must be an integer from 1 to 100000')
      .optional(),
    maxStartsPerMinute: z
      .number({ error: 'must be an integer from 1 to 1000000' })
      .int('must be an integer from 1 to 1000000')
      .min(1, 'must be an integer from 1 to 1000000')
      .max(1_000_000, 'must be an integer from 1 to 1000000')
      .optional(),
    maxTokensPerMinute: z
      .number({ error: 'must be an integer from 1 to 1000000000' })
      .int('must be an integer from 1 to 1000000000')
      .min(1, 'must be an integer from 1 to 1000000000')
      .max(1_000_000_000, 'must be an integer from 1 to 1000000000')
      .optional(),
  })
  .refine((limit) => limit.maxConcurrent !== undefined || limit.maxStartsPerMinute !== undefined || limit.maxTokensPerMinute !== undefined, {
    message: 'a limit needs maxConcurrent, maxStartsPerMinute and/or maxTokensPerMinute',
    path: ['maxConcurrent'],
  });

export interface LimitRule {
  name: string;
  match: Partial<Record<MatchField, string>>;
  maxConcurrent: number;
  maxStartsPerMinute: number;
  /** Tokens the attempts under it reported in the last minute, at most (0: no cap): over it, new starts wait. */
  maxTokensPerMinute: number;
}

/** A limit's name when the operator gave none: its match, e.g. `provider=anthropic,tenant=*` (`all` for an empty match). */
export function derivedName(match: Partial<Record<MatchField, string>>): string {
  const parts = MATCH_FIELDS.filter((f) => match[f] !== undefined).map((f) => `${f}=${match[f] ?? ''}`);
  return parts.length === 0 ? 'all' : parts.join(',');
}

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
      if (seen.has(rule.name)) ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `"${rule.name}" names two limits: give each a unique name` });
      seen.add(rule.name);
    });
    return rules;
  });

export type LimitsResult = { ok: true; limits: LimitRule[] } | { ok: false; errors: Array<{ field: string; message: string }> };

/** Parses a list of limits (JSON text or a value); errors name the field (`limits.1.maxConcurrent: …`). */
export function parseLimits(input: unknown, field = 'limits'): LimitsResult {
  let value = input;
  if (typeof input === 'string') {
    try {
      value = JSON.parse(input) as unknown;
    } catch {
      return { ok: false, errors: [{ field, message: 'must be a JSON array of limits, e.g. [{"match":{"provider":"anthropic"},"maxConcurrent":20}]' }] };
    }
  }
  const parsed = LimitsSchema.safeParse(value);
  if (parsed.success) return { ok: true, limits: parsed.data };
  return { ok: false, errors: parsed.error.issues.map((i) => ({ field: [field, ...i.path.map(String)].join('.'), message: i.message })) };
}

/** What a session's next attempt is matched on. */
export type MatchValues = Partial<Record<MatchField, string>>;

/** One limit's key for one session: the limit and the distinct values its `*` fields took. */
export interface LimitKey {
  /** The limit's name (the metrics label). */
  name: string;
  /** Unique per limit and distinct value: the name, then `|field=value` per `*` field. */
  key: string;
  maxConcurrent: number;
  maxStartsPerMinute: number;
  maxTokensPerMinute: number;
}

/** The limit keys an attempt with these values falls under (a `*` field the attempt has no value for does not match). */
export function limitKeysFor(rules: readonly LimitRule[], values: MatchValues): LimitKey[] {
  const keys: LimitKey[] = [];
  for (const rule of rules) {
    let key = rule.name;
    let matches = true;
    for (const field of MATCH_FIELDS) {
      const want = rule.match[field];
      if (want === undefined) continue;
      const have = values[field];
      if (have === undefined || have === '') {
        matches = false;
        break;
      }
      if (want === '*') key += `|${field}=${have}`;
      else if (want !== have) {
        matches = false;
        break;
      }
    }
    if (matches) keys.push({ name: rule.name, key, maxConcurrent: rule.maxConcurrent, maxStartsPerMinute: rule.maxStartsPerMinute, maxTokensPerMinute: rule.maxTokensPerMinute });
  }
  return keys;
}
