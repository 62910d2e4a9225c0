/**
 * Durations as people write them in config files, env vars and flags.
 * Contract: `parseDuration` never throws and yields a whole, non-negative, safe-integer number of
 * milliseconds; for any such value, `formatDuration` output parses back to the same value.
 */

const UNITS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
type Unit = keyof typeof UNITS;

const DURATION = /^(\d+)(?:\.(\d+))?(ms|s|m|h|d)?$/;
const EXPECTED =
  'expected a number with a unit ms, s, m, h or d (e.g. 500ms, 2s, 1.5m, 1h, 30d) or a whole number of milliseconds';

export type DurationResult = { ok: true; ms: number } | { ok: false; message: string };

/** Accepts `500ms`, `2s`, `1.5s`, `1m`, `1h`, `30d`, or a plain integer meaning milliseconds; surrounding spaces are ignored. */
export function parseDuration(input: string): DurationResult {
  if (typeof input !== 'string') return fail(`invalid duration: ${EXPECTED} (got ${typeof input})`);
  const text = input.trim();
  if (text === '') return fail(`invalid duration: empty; ${EXPECTED}`);
  const shown = JSON.stringify(text.length > 40 ? `${text.slice(0, 39)}…` : text);
  if (/^-\s*\d/.test(text)) return fail(`invalid duration ${shown}: must not be negative`);
  const match = DURATION.exec(text);
  if (match === null) return fail(`invalid duration ${shown}: ${EXPECTED}`);
  const [, whole = '0', fraction, unit] = match;
  if (unit === undefined && fraction !== undefined) {
    return fail(`invalid duration ${shown}: a number without a unit is milliseconds and must be whole`);
  }
  // BigInt keeps `1.1s` exact (1.1 * 1000 is 1100.0000000000002 in floating point).
  const scale = BigInt(UNITS[(unit ?? 'ms') as Unit]);
  const digits = fraction ?? '';
  const fractionScaled = BigInt(digits || '0') * scale;
  const denominator = 10n ** BigInt(digits.length);
  if (fractionScaled % denominator !== 0n) {
    return fail(`invalid duration ${shown}: finer than a millisecond`);
  }
  const ms = BigInt(whole) * scale + fractionScaled / denominator;
  if (ms > BigInt(Number.MAX_SAFE_INTEGER)) return fail(`invalid duration ${shown}: too large`);
  return { ok: true, ms: Number(ms) };
}

/**
 * Renders milliseconds in the largest unit that shows them exactly with at most 3 decimals:
 * 500 → `500ms`, 1500 → `1.5s`, 120000 → `2m`, 5400000 → `1.5h`, 61000 → `61s`.
 * Fractional input is rounded to whole ms; non-finite input is shown as is.
 */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) return String(ms);
  if (ms < 0) return `-${formatDuration(-ms)}`;
  const rounded = Math.round(ms);
  for (const unit of ['h', 'm', 's'] as const) {
    const size = UNITS[unit];
    // One thousandth of the unit must divide the value for 3 decimals to be exact.
    if (rounded >= size && rounded % (size / 1000) === 0) {
      const thousandths = String((rounded % size) / (size / 1000))
        .padStart(3, '0')
        .replace(/0+$/, '');
      return `${Math.floor(rounded / size)}${thousandths === '' ? '' : `.${thousandths}`}${unit}`;
    }
  }
  return `${rounded}ms`;
}

function fail(message: string): DurationResult {
  return { ok: false, message };
}
