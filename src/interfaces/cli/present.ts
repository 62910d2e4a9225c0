/** Terminal presentation: colours and a spinner only when the stream is a TTY (and NO_COLOR is unset). */
const ESC = '\u001b[';

export function colors(stream: NodeJS.WriteStream = process.stdout) {
  const on = stream.isTTY === true && process.env.NO_COLOR === undefined;
  const wrap = (code: string) => (text: string) => (on ? `${ESC}${code}m${text}${ESC}0m` : text);
  return {
    on,
    dim: wrap('2'),
    bold: wrap('1'),
    red: wrap('31'),
    green: wrap('32'),
    yellow: wrap('33'),
    cyan: wrap('36'),
    magenta: wrap('35'),
  };
}

/** A one-line spinner on stderr while waiting (a turn, a backoff); a no-op when stderr is not a TTY. */
export class Spinner {
  static readonly FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
  #timer: NodeJS.Timeout | undefined;
  #text = '';
  #frame = 0;
  readonly #enabled = process.stderr.isTTY === true;

  set(text: string): void {
    this.#text = text;
    if (!this.#enabled || this.#timer !== undefined) return;
    this.#timer = setInterval(() => {
      this.#frame = (this.#frame + 1) % Spinner.FRAMES.length;
      process.stderr.write(`\r${Spinner.FRAMES[this.#frame]} ${this.#text}\u001b[K`);
    }, 100);
    this.#timer.unref();
  }

  clear(): void {
    if (this.#timer === undefined) return;
    clearInterval(this.#timer);
    this.#timer = undefined;
    process.stderr.write('\r\u001b[K');
  }
}

export function formatMs(ms: number): string {
  if (ms < 1000) return `${ms}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms % 1000 === 0 ? 0 : 1)}s`;
  return `${(ms / 60_000).toFixed(1)}m`;
}

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}
