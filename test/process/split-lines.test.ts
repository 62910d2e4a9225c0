import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LineSplitter, splitLines } from '../../src/process/split-lines.ts';

async function* chunksOf(...chunks: Array<string | Uint8Array>): AsyncGenerator<string | Uint8Array> {
  yield* chunks;
}

async function collect(source: AsyncIterable<string>): Promise<string[]> {
  const lines: string[] = [];
  for await (const line of source) lines.push(line);
  return lines;
}

describe('splitLines', () => {
  it('splits on \\n only, keeping U+2028 and U+2029 inside a line', async () => {
    const json = JSON.stringify({ text: 'a\u2028b\u2029c' });
    expect(await collect(splitLines(chunksOf(`${json}\nnext\n`)))).toEqual([json, 'next']);
  });

  it('strips a trailing \\r but keeps one inside the line', async () => {
    expect(await collect(splitLines(chunksOf('a\rb\r\nc\r\n')))).toEqual(['a\rb', 'c']);
  });

  it('delivers the last unterminated line at the end', async () => {
    expect(await collect(splitLines(chunksOf('one\ntw', 'o')))).toEqual(['one', 'two']);
  });

  it('keeps empty lines and emits nothing for empty input', async () => {
    expect(await collect(splitLines(chunksOf('\n\nx\n')))).toEqual(['', '', 'x']);
    expect(await collect(splitLines(chunksOf()))).toEqual([]);
  });

  it('decodes a multi-byte character cut between chunks', async () => {
    const bytes = Buffer.from('€\n', 'utf8');
    expect(await collect(splitLines(chunksOf(bytes.subarray(0, 1), bytes.subarray(1, 2), bytes.subarray(2))))).toEqual([
      '€',
    ]);
  });

  it('gives back the same lines however the bytes are cut into chunks', () => {
    const line = fc
      .string({ unit: fc.constantFrom('a', 'é', '€', '😀', '\u2028', '\u2029', '\r', ' ', '"') })
      .filter((s) => !s.endsWith('\r'));
    fc.assert(
      fc.property(
        fc.array(line, { minLength: 1, maxLength: 8 }),
        fc.boolean(),
        fc.array(fc.nat(), { maxLength: 10 }),
        (lines, terminated, cuts) => {
          const bytes = Buffer.from(lines.join('\n') + (terminated ? '\n' : ''), 'utf8');
          const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
          const splitter = new LineSplitter();
          const out: string[] = [];
          let from = 0;
          for (const point of [...points, bytes.length]) {
            out.push(...splitter.push(bytes.subarray(from, point)));
            from = point;
          }
          const last = splitter.flush();
          if (last !== undefined) out.push(last);
          const expected = terminated || lines.at(-1) !== '' ? lines : lines.slice(0, -1);
          expect(out).toEqual(expected);
        },
      ),
    );
  });
});
