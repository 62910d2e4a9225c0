export {
  derivedName,
  LimitSchema,
  LimitsSchema,
  limitKeysFor,
  MATCH_FIELDS,
  parseLimits,
  type LimitKey,
  type LimitRule,
  type LimitsResult,
  type MatchField,
  type MatchValues,
} from './config.ts';
export { FleetLimits, type Admission, type Hold, type LimitStatus } from './fleet-limits.ts';
