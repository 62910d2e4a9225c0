/**
 * The shared part of the agents' `checkState`: an exported state is a JSON object with exactly the
 * agent's fields. Errors start with the field at fault (`value: …`, `value.<name>: …`), as an
 * archive's error names it.
 */
export function stateObject(raw: string, fields: readonly string[]): Record<string, unknown> {
  const shape = `{${fields.map((f) => `"${f}"`).join(',')}}`;
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    throw new Error(`value: not JSON (this agent's state is ${shape})`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw new Error(`value: must be an object ${shape}`);
  const extra = Object.keys(value).find((k) => !fields.includes(k));
  if (extra !== undefined) throw new Error(`value.${extra}: unknown field (this agent's state is ${shape})`);
  return value as Record<string, unknown>;
}

/** A string field of a state; `value.<name>: must be a string` otherwise. */
export function stringField(state: Record<string, unknown>, name: string): string {
  const value = state[name];
  if (typeof value !== 'string') throw new Error(`value.${name}: must be a string`);
  return value;
}

/** A value shown in an error: JSON, at most 120 characters of it. */
export function shown(value: string): string {
  return JSON.stringify(value.length > 120 ? `${value.slice(0, 119)}…` : value);
}
