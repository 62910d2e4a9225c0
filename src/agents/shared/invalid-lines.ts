/** Keeps the agent's bad output lines for the terminal message, bounded in count and length. */
export const MAX_INVALID_LINES = 50;
export const MAX_INVALID_LINE_CHARS = 2000;

export class InvalidLines {
  readonly #lines: string[] = [];
  #dropped = 0;

  add(lineNumber: number, line: string, why: string): void {
    if (this.#lines.length >= MAX_INVALID_LINES) {
      this.#dropped += 1;
      return;
    }
    const shown =
      line.length > MAX_INVALID_LINE_CHARS ? `${line.slice(0, MAX_INVALID_LINE_CHARS)}…(${line.length} chars)` : line;
    this.#lines.push(`line ${lineNumber}: ${why}: ${shown}`);
  }

  get count(): number {
    return this.#lines.length + this.#dropped;
  }

  list(): string[] {
    return this.#dropped === 0 ? [...this.#lines] : [...this.#lines, `…and ${this.#dropped} more invalid lines`];
  }
}

export type ParsedLine =
  { ok: true; event: Record<string, unknown> & { type: string } } | { ok: false; why: string } | { ok: 'blank' };

/** Parses one JSON-lines record; never throws. */
export function parseEventLine(line: string): ParsedLine {
  if (line.trim() === '') return { ok: 'blank' };
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    // The reason is the answer: the line is reported as not JSON.
    return { ok: false, why: 'not JSON' };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    return { ok: false, why: 'not a JSON object' };
  const type = (value as { type?: unknown }).type;
  if (typeof type !== 'string') return { ok: false, why: 'JSON without a string "type"' };
  return { ok: true, event: value as Record<string, unknown> & { type: string } };
}

/** The agent's stdout, line by line: each line's event, or null for a blank or bad one (bad ones are kept). */
export class EventLines {
  readonly invalid = new InvalidLines();
  #lineNumber = 0;
  #validEvents = 0;

  /** How many lines held an event. */
  get validEvents(): number {
    return this.#validEvents;
  }

  read(line: string): (Record<string, unknown> & { type: string }) | null {
    this.#lineNumber += 1;
    const parsed = parseEventLine(line);
    if (parsed.ok === 'blank') return null;
    if (!parsed.ok) {
      this.invalid.add(this.#lineNumber, line, parsed.why);
      return null;
    }
    this.#validEvents += 1;
    return parsed.event;
  }
}
