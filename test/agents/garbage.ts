import fc from 'fast-check';

/**
 * Lines an agent's stdout may hold that are not its events: any text, a few known troublemakers,
 * and JSON without a string `type`. `extra`: lines typical of one agent (its banners, stack traces).
 * Shared by the agents' mapper property tests.
 */
export function arbitraryGarbageLine(extra: readonly string[] = []): fc.Arbitrary<string> {
  return fc.oneof(
    fc.string(),
    fc.constantFrom(
      '{"type":',
      '{}',
      '[]',
      'null',
      '42',
      '"text"',
      '{"type":17}',
      '{"noType":"x"}',
      'Error: something\u2028odd',
      '\u0000\u0001',
      ...extra,
    ),
    fc.json().filter((j) => {
      try {
        const v = JSON.parse(j) as unknown;
        return (
          v === null || typeof v !== 'object' || Array.isArray(v) || typeof (v as { type?: unknown }).type !== 'string'
        );
      } catch {
        return true;
      }
    }),
  );
}

/** Inserts each garbage line at its position (positions are taken modulo the growing length). */
export function interleave(lines: readonly string[], inserts: ReadonlyArray<[number, string]>): string[] {
  const out = [...lines];
  for (const [at, garbage] of inserts) out.splice(at % (out.length + 1), 0, garbage);
  return out;
}
