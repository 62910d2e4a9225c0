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

/**
 * `--agent-option KEY=VALUE` (repeatable): an option of the chosen agent that has no flag of its
 * own (e.g. permissionMode, sandbox, approvalMode). VALUE is read as JSON when it parses, else as a string.
 */
export function collectAgentOption(value: string, previous: Record<string, unknown> = {}): Record<string, unknown> {
  const eq = value.indexOf('=');
  if (eq <= 0) throw new InvalidArgumentError(`--agent-option must be KEY=VALUE (got "${value}")`);
  const key = value.slice(0, eq);
  if (!/^[A-Za-z][A-Za-z0-9]*$/.test(key))
    throw new InvalidArgumentError(`--agent-option: "${key}" is not an option name`);
  const raw = value.slice(eq + 1);
  let parsed: unknown = raw;
  try {
    parsed = JSON.parse(raw) as unknown;
  } catch {
    // a plain string
  }
  return { ...previous, [key]: parsed };
}
