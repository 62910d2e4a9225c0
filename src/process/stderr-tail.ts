export const DEFAULT_STDERR_TAIL_BYTES = 64 * 1024;

/** Keeps the last `maxBytes` bytes written to it; memory stays bounded however much is pushed. */
export class StderrTail {
  private chunks: Buffer[] = [];
  private size = 0;

  constructor(private readonly maxBytes: number = DEFAULT_STDERR_TAIL_BYTES) {}

  push(chunk: Uint8Array | string): void {
    if (this.maxBytes <= 0) return;
    let bytes =
      typeof chunk === 'string'
        ? Buffer.from(chunk, 'utf8')
        : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    // Copy what is kept: a slice would pin the whole (possibly large) chunk in memory.
    bytes = Buffer.from(bytes.length > this.maxBytes ? bytes.subarray(bytes.length - this.maxBytes) : bytes);
    this.chunks.push(bytes);
    this.size += bytes.length;
    while (this.size > this.maxBytes) {
      const head = this.chunks[0];
      if (head === undefined) break;
      const excess = this.size - this.maxBytes;
      if (head.length <= excess) {
        this.chunks.shift();
        this.size -= head.length;
      } else {
        this.chunks[0] = Buffer.from(head.subarray(excess));
        this.size -= excess;
      }
    }
  }

  /** The kept bytes as UTF-8, without a character cut in half at the start. */
  text(): string {
    const bytes = Buffer.concat(this.chunks, this.size);
    let start = 0;
    // Skip continuation bytes (10xxxxxx) of a character whose first byte was dropped.
    while (start < bytes.length && start < 3 && ((bytes[start] ?? 0) & 0xc0) === 0x80) start += 1;
    return bytes.toString('utf8', start);
  }

  get byteLength(): number {
    return this.size;
  }
}
