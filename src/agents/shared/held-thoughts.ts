import type { CliMessage } from '../../protocol/index.ts';

/** Thinking text held back by a mapper until it knows where in the output it belongs; then emitted in order. */
export class HeldThoughts {
  #texts: string[] = [];

  push(text: string): void {
    this.#texts.push(text);
  }

  /** Appends the held thoughts to `out` as `assistant.thought` messages and forgets them. */
  drainInto(out: CliMessage[]): void {
    for (const text of this.#texts) out.push({ type: 'assistant.thought', content: { text } });
    this.#texts = [];
  }
}
