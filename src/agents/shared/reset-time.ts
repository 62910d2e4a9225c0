/**
 * The reset time a provider names in its rate-limit error, as ms from `now`: Claude's "You've hit
 * your limit · resets 4am (Europe/Berlin)" and "usage limit reached|<epoch>", and rate-limit reset
 * headers relayed in the error text (`x-ratelimit-reset-requests: 6m0s`, `anthropic-ratelimit-…-reset:
 * 2026-01-01T04:00:00Z`, epoch seconds). Contract: pure, never throws; undefined when the text names
 * no reset, or one not after `now`.
 */
export function resetAfterMsOf(text: string, now: number): number | undefined {
  const at = epochAfterPipe(text) ?? resetHeader(text, now) ?? clockTime(text, now);
  if (at === undefined || !Number.isFinite(at) || at <= now) return undefined;
  return Math.ceil(at - now);
}

/** "Claude AI usage limit reached|1767236400": epoch seconds (or ms) after the pipe. */
function epochAfterPipe(text: string): number | undefined {
  const match = /limit reached\s*\|\s*(\d{10}|\d{13})\b/i.exec(text);
  if (match?.[1] === undefined) return undefined;
  const n = Number(match[1]);
  return match[1].length === 13 ? n : n * 1000;
}

const HEADER = /\b(?:x-|anthropic-)?ratelimit(?:-[a-z]+)*-reset(?:-[a-z]+)*["']?\s*[:=]\s*["']?([0-9][^\s,"'}\]]*)/i;
const DURATION_PART = /(\d+(?:\.\d+)?)(ms|h|m|s)/g;

/** A reset header's value: an RFC 3339 time, epoch seconds or ms, seconds from now, or a duration such as `1h2m3.5s`. */
function resetHeader(text: string, now: number): number | undefined {
  const value = HEADER.exec(text)?.[1];
  if (value === undefined) return undefined;
  if (/^\d{4}-\d{2}-\d{2}T/.test(value)) {
    const parsed = Date.parse(value);
    return Number.isNaN(parsed) ? undefined : parsed;
  }
  if (/^\d+(?:\.\d+)?$/.test(value)) {
    const n = Number(value);
    if (n >= 1e12) return n;
    if (n >= 1e9) return n * 1000;
    return now + n * 1000;
  }
  if (!/^(?:\d+(?:\.\d+)?(?:ms|h|m|s))+$/.test(value)) return undefined;
  const unit: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  let ms = 0;
  for (const [, amount, u] of value.matchAll(DURATION_PART)) ms += Number(amount) * (unit[u ?? 's'] ?? 1000);
  return now + ms;
}

const CLOCK =
  /\bresets?\s+(?:at\s+)?(\d{1,2})(?::(\d{2}))?\s*(am|pm)?(?=[\s.,;)·∙|]|$)(?:\s*\(([A-Za-z_]+(?:\/[A-Za-z0-9_+-]+)*)\))?/i;

/** "resets 4am", "resets at 4:30pm (Europe/Berlin)", "resets 16:00 (UTC)": the next such wall-clock time, in that zone (else the host's). */
function clockTime(text: string, now: number): number | undefined {
  const match = CLOCK.exec(text);
  if (match === null) return undefined;
  const [, hourText, minuteText, meridiem, zone] = match;
  // A bare number ("resets 5") is not a time of day.
  if (minuteText === undefined && meridiem === undefined) return undefined;
  let hour = Number(hourText);
  const minute = minuteText === undefined ? 0 : Number(minuteText);
  if (meridiem !== undefined) {
    if (hour < 1 || hour > 12) return undefined;
    hour = (hour % 12) + (meridiem.toLowerCase() === 'pm' ? 12 : 0);
  }
  if (hour > 23 || minute > 59) return undefined;
  const timeZone = zone !== undefined && validZone(zone) ? zone : undefined;
  const today = partsIn(now, timeZone);
  for (const dayOffset of [0, 1]) {
    const at = zonedToEpoch(today.year, today.month, today.day + dayOffset, hour, minute, timeZone);
    if (at > now) return at;
  }
  return undefined;
}

function validZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return true;
  } catch {
    // Not a time zone this runtime knows: the caller treats the reset as unknown.
    return false;
  }
}

interface Parts {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

function partsIn(epoch: number, timeZone: string | undefined): Parts {
  const format = new Intl.DateTimeFormat('en-US', {
    ...(timeZone === undefined ? {} : { timeZone }),
    hourCycle: 'h23',
    year: 'numeric',
    month: 'numeric',
    day: 'numeric',
    hour: 'numeric',
    minute: 'numeric',
    second: 'numeric',
  });
  const get = (type: string): number => Number(format.formatToParts(epoch).find((p) => p.type === type)?.value ?? 0);
  return {
    year: get('year'),
    month: get('month'),
    day: get('day'),
    hour: get('hour'),
    minute: get('minute'),
    second: get('second'),
  };
}

/** The instant at which the zone's wall clock shows this date and time (twice corrected for the zone's offset, DST included). */
function zonedToEpoch(
  year: number,
  month: number,
  day: number,
  hour: number,
  minute: number,
  timeZone: string | undefined,
): number {
  const wall = Date.UTC(year, month - 1, day, hour, minute);
  let guess = wall;
  for (let i = 0; i < 2; i += 1) {
    const p = partsIn(guess, timeZone);
    const shown = Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute, p.second);
    guess += wall - shown;
  }
  return guess;
}
