import type { Usage } from '../../protocol/index.ts';

/** An agent event's field as an object; undefined when it is anything else (null, an array, a scalar). */
export function obj(value: unknown): Record<string, unknown> | undefined {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;
}

/** An agent event's field as a string; '' when it is anything else. */
export function str(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

/** An agent event's field as a finite number; undefined when it is anything else (NaN, ±Infinity from a huge literal, a string). */
export function num(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

/** The finite numbers among `source`'s fields, renamed from the agent's names to the contract's (`[agentName, usageField]` pairs). */
export function usageFields(
  source: Record<string, unknown> | undefined,
  names: ReadonlyArray<readonly [string, keyof Usage]>,
): Usage {
  const usage: Usage = {};
  if (source === undefined) return usage;
  for (const [from, to] of names) {
    const value = num(source[from]);
    if (value !== undefined) usage[to] = value;
  }
  return usage;
}
