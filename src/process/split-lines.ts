const LF = 0x0a;
const CR = 0x0d;

/**
 * Splits a byte stream into lines on '\n' only; a trailing '\r' is stripped.
 * Not readline: that also splits on U+2028/U+2029, which JSON strings may hold.
 * Works on bytes, so a UTF-8 character cut between two chunks is decoded whole
 * (the byte 0x0a never occurs inside a multi-byte UTF-8 sequence).
 */
export class LineSplitter {
  private pending: Buffer[] = [];

  /** The lines that `chunk` completes. */
  push(chunk: Uint8Array | string): string[] {
    const bytes =
      typeof chunk === 'string'
        ? Buffer.from(chunk, 'utf8')
        : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    const lines: string[] = [];
    let start = 0;
    for (let lf = bytes.indexOf(LF, start); lf !== -1; lf = bytes.indexOf(LF, start)) {
      this.pending.push(bytes.subarray(start, lf));
      lines.push(decodeLine(Buffer.concat(this.pending)));
      this.pending = [];
      start = lf + 1;
    }
    if (start < bytes.length) this.pending.push(Buffer.from(bytes.subarray(start)));
    return lines;
  }

  /** The last, unterminated line, if any bytes are left; the splitter is empty afterwards. */
  flush(): string | undefined {
    if (this.pending.length === 0) return undefined;
    const line = decodeLine(Buffer.concat(this.pending));
    this.pending = [];
    return line;
  }
}

function decodeLine(bytes: Buffer): string {
  const end = bytes.length > 0 && bytes[bytes.length - 1] === CR ? bytes.length - 1 : bytes.length;
  return bytes.toString('utf8', 0, end);
}

/** Lines of a byte stream, see `LineSplitter`; the last unterminated line comes at the end. */
export async function* splitLines(source: AsyncIterable<Uint8Array | string>): AsyncGenerator<string> {
  const splitter = new LineSplitter();
  for await (const chunk of source) yield* splitter.push(chunk);
  const last = splitter.flush();
  if (last !== undefined) yield last;
}
