/**
 * What a fleet limit matches on and the keys an attempt falls under: plain code, without the
 * schema (config.ts, zod), for the runtime that a read-only command loads.
 */
export const MATCH_FIELDS = ['agent', 'provider', 'model', 'account', 'tenant'] as const;
export type MatchField = (typeof MATCH_FIELDS)[number];

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
    if (matches)
      keys.push({
        name: rule.name,
        key,
        maxConcurrent: rule.maxConcurrent,
        maxStartsPerMinute: rule.maxStartsPerMinute,
        maxTokensPerMinute: rule.maxTokensPerMinute,
      });
  }
  return keys;
}
