import { InvalidArgumentError } from 'commander';
import { parseDuration } from '../../config/duration.ts';

/** A commander option parser for an integer within [min, max], whose error names the option. */
export function parseIntegerOption(name: string, min: number, max: number): (value: string) => number {
  return (value: string) => {
    const n = Number(value);
    if (!/^-?\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(`${name} must be an integer from ${min} to ${max} (got "${value}")`);
    }
    return n;
  };
}

/** A commander option parser for a duration (`500ms`, `2s`, `1m`), whose error names the option. */
export function parseDurationOption(name: string): (value: string) => number {
  return (value: string) => {
    const parsed = parseDuration(value);
    if (!parsed.ok) throw new InvalidArgumentError(`${name}: ${parsed.message}`);
    return parsed.ms;
  };
}
