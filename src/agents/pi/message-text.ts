/**
 * The text and thinking of one assistant message as pi streams it, from its
 * cumulative snapshots (`message` / `partial`) or, where an event carries none,
 * from its deltas. Snapshots win: they can run ahead of the deltas.
 */
type BlockKind = 'text' | 'thinking' | 'other';

interface Block {
  kind: BlockKind;
  text: string;
}

export class MessageText {
  #blocks: Block[] = [];

  /** Replaces everything known with a snapshot's content array. */
  setSnapshot(content: unknown): void {
    if (!Array.isArray(content)) return;
    const blocks: Block[] = [];
    for (const raw of content as unknown[]) {
      blocks.push(blockOf(raw));
    }
    this.#blocks = blocks;
  }

  /** Appends a delta to the block at `index` (used only when the event has no snapshot). */
  appendDelta(index: number, kind: 'text' | 'thinking', delta: string): void {
    if (!Number.isInteger(index) || index < 0 || index > 10_000) return;
    while (this.#blocks.length <= index) this.#blocks.push({ kind: 'other', text: '' });
    const block = this.#blocks[index];
    if (block === undefined) return;
    if (block.kind !== kind) {
      block.kind = kind;
      block.text = '';
    }
    block.text += delta;
  }

  text(): string {
    return this.#join('text');
  }

  thinking(): string {
    return this.#join('thinking');
  }

  #join(kind: BlockKind): string {
    let out = '';
    for (const block of this.#blocks) {
      if (block.kind === kind) out = out === '' ? block.text : out + block.text;
    }
    return out;
  }
}

function blockOf(raw: unknown): Block {
  if (raw === null || typeof raw !== 'object') return { kind: 'other', text: '' };
  const block = raw as { type?: unknown; text?: unknown; thinking?: unknown };
  if (block.type === 'text' && typeof block.text === 'string') return { kind: 'text', text: block.text };
  if (block.type === 'thinking' && typeof block.thinking === 'string')
    return { kind: 'thinking', text: block.thinking };
  return { kind: 'other', text: '' };
}
