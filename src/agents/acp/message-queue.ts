import type { CliMessage } from '../../protocol/index.ts';

/** A queue of messages the SDK's handlers fill and the generator drains, in arrival order. */
export class MessageQueue {
  readonly #items: CliMessage[] = [];
  #wake: (() => void) | null = null;

  push(messages: readonly CliMessage[]): void {
    if (messages.length === 0) return;
    this.#items.push(...messages);
    this.#wake?.();
  }

  take(): CliMessage[] {
    return this.#items.splice(0);
  }

  next(): Promise<void> {
    if (this.#items.length > 0) return Promise.resolve();
    return new Promise<void>((resolve) => (this.#wake = () => resolve())).finally(() => (this.#wake = null));
  }
}
