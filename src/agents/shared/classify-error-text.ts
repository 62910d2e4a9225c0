import type { FailureCategory } from '../../protocol/index.ts';
import { resetAfterMsOf } from './reset-time.ts';

/**
 * Decides the failure category of an agent's own error text (an HTTP error
 * relayed by the agent, a socket error, a timeout). Used by every agent
 * mapper: the category is decided once, at the boundary that knows.
 * Contract: pure, never throws; `unknown` when nothing matches.
 */
export interface ClassifiedError {
  category: FailureCategory;
  status?: number;
  retryAfterMs?: number;
}

const STATUS_PATTERNS = [
  /^\s*(\d{3})\b/,
  /\bstatus(?:\s*code)?\s*[:=]?\s*(\d{3})\b/i,
  /\bHTTP\s*\/?\s*(?:\d(?:\.\d)?\s+)?(\d{3})\b/i,
  /\b(\d{3})\s+(?:Unauthorized|Forbidden|Too Many Requests|Internal Server Error|Bad Gateway|Service Unavailable|Gateway Timeout|Bad Request|Not Found|Request Timeout)\b/i,
];

const TIMEOUT = /\b(timed?\s*out|timeout|ETIMEDOUT|deadline exceeded)\b/i;
const NETWORK =
  /\b(terminated|ECONNRESET|ECONNREFUSED|ECONNABORTED|EPIPE|ENOTFOUND|EAI_AGAIN|ENETUNREACH|EHOSTUNREACH|socket hang up|connection (?:error|reset|refused|closed)|fetch failed|network error|other side closed|premature close)\b/i;
const OVERLOADED = /\b(overloaded|server error|service unavailable|bad gateway|internal error)\b/i;
const RATE_LIMIT =
  /\b(rate[ _-]?limit(?:ed)?|too many requests|quota exceeded|resource[_ ]exhausted|usage limit|hit your limit|\d+-hour limit|weekly limit)\b/i;
const AUTH =
  /\b(unauthori[sz]ed|forbidden|invalid api key|invalid x-api-key|authentication|permission denied|no api key)\b/i;

export function statusOf(text: string): number | undefined {
  for (const pattern of STATUS_PATTERNS) {
    const match = pattern.exec(text);
    if (match?.[1]) {
      const status = Number(match[1]);
      if (status >= 400 && status <= 599) return status;
    }
  }
  return undefined;
}

export function categoryForStatus(status: number): FailureCategory {
  if (status === 401 || status === 403) return 'auth';
  if (status === 429) return 'rate_limited';
  if (status === 408) return 'timeout';
  if (status >= 500) return 'server_error';
  return 'bad_request';
}

const UNIT_MS: Record<string, number> = {
  ms: 1,
  s: 1000,
  sec: 1000,
  second: 1000,
  seconds: 1000,
  m: 60_000,
  min: 60_000,
  minute: 60_000,
  minutes: 60_000,
  h: 3_600_000,
  hr: 3_600_000,
  hour: 3_600_000,
  hours: 3_600_000,
};
const RETRY_AFTER_PATTERNS = [
  /retry[- _]after["']?\s*[:=]?\s*["']?(\d+(?:\.\d+)?)\s*(ms|s|sec|seconds?|m|min|minutes?|h|hr|hours?)?\b/i,
  /(?:try|retry)(?:ing)? again in\s+(\d+(?:\.\d+)?)\s*(ms|s|sec|seconds?|m|min|minutes?|h|hr|hours?)?\b/i,
  /retry in\s+(\d+(?:\.\d+)?)\s*(ms|s|sec|seconds?|m|min|minutes?|h|hr|hours?)\b/i,
];

/** A Retry-After hint in error text or a header value, in ms. Seconds when no unit is given (RFC 9110). */
export function retryAfterMsOf(text: string): number | undefined {
  for (const pattern of RETRY_AFTER_PATTERNS) {
    const match = pattern.exec(text);
    if (match?.[1]) {
      const unit = (match[2] ?? 's').toLowerCase();
      const ms = Math.round(Number(match[1]) * (UNIT_MS[unit] ?? 1000));
      if (Number.isFinite(ms) && ms >= 0) return ms;
    }
  }
  return undefined;
}

export { resetAfterMsOf } from './reset-time.ts';

/** `now`: the clock a recognised reset time ("resets at 4am", a reset header) is measured from. */
export function classifyErrorText(text: string, now: number = Date.now()): ClassifiedError {
  const status = statusOf(text);
  // A Retry-After wins; else a reset the provider named (a quota wall's, typically).
  const retryAfterMs = retryAfterMsOf(text) ?? resetAfterMsOf(text, now);
  const withHint = (category: FailureCategory): ClassifiedError => ({
    category,
    ...(status === undefined ? {} : { status }),
    ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
  });
  if (status !== undefined) return withHint(categoryForStatus(status));
  if (RATE_LIMIT.test(text)) return withHint('rate_limited');
  if (AUTH.test(text)) return withHint('auth');
  if (TIMEOUT.test(text)) return withHint('timeout');
  if (NETWORK.test(text)) return withHint('network');
  if (OVERLOADED.test(text)) return withHint('server_error');
  return withHint('unknown');
}
