import { parseHostPattern, type HostPattern } from '../../src/process/egress/index.ts';

/** A host pattern of the allow-list from its text (a test's own are valid: a bad one throws its error). */
export function hostPattern(text: string): HostPattern {
  const parsed = parseHostPattern(text);
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.pattern;
}
