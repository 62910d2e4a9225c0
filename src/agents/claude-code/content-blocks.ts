import { obj, str } from '../shared/event-fields.ts';

/**
 * The content blocks of Claude Code's assistant messages, seen two ways: streamed
 * (`stream_event` deltas, with `--include-partial-messages`) and completed (one
 * `assistant` line per finished block, always printed, repeating what was streamed).
 * Each block is released once: text as it grows (deltas, or the whole block when it
 * was not streamed), thinking and tool calls when the block is done.
 *
 * Contract: for every text block, the text released adds up to its completed text
 * (or, for a block cut off before it completed, to what was streamed); no character
 * twice. A completed text that rewrote streamed text cannot be taken back: only what
 * lies beyond the streamed length is released.
 */
export type BlockKind = 'text' | 'thinking' | 'tool_use' | 'other';

interface Block {
  kind: BlockKind;
  /** Text or thinking so far; for tool_use, the input JSON streamed so far. */
  text: string;
  /** No more deltas: released as far as it goes. */
  done: boolean;
  /** An `assistant` line completed it. */
  confirmed: boolean;
  toolId: string;
  toolName: string;
}

export type BlockOutput =
  | { type: 'text'; text: string }
  | { type: 'thinking'; text: string }
  | { type: 'tool_use'; id: string; name: string; input: unknown };

const MAX_INDEX = 10_000;

export class ContentBlocks {
  #messageId: string | null = null;
  /** The streamed blocks of the current message, by index. */
  #blocks = new Map<number, Block>();

  /** `message_start`: a new API message. What the previous one left undone is finished as it stands. */
  startMessage(messageId: string): BlockOutput[] {
    const out = this.finishMessage();
    this.#blocks = new Map();
    this.#messageId = messageId;
    return out;
  }

  /** `content_block_start`. */
  startBlock(index: number, raw: Record<string, unknown> | undefined): BlockOutput[] {
    if (!validIndex(index) || this.#blocks.has(index)) return [];
    const kind = kindOf(raw?.type);
    const initial = kind === 'text' ? str(raw?.text) : kind === 'thinking' ? str(raw?.thinking) : '';
    this.#blocks.set(index, {
      kind,
      text: initial,
      done: false,
      confirmed: false,
      toolId: str(raw?.id),
      toolName: str(raw?.name),
    });
    return kind === 'text' && initial !== '' ? [{ type: 'text', text: initial }] : [];
  }

  /** `content_block_delta` of kind text, thinking or tool input. */
  delta(index: number, kind: 'text' | 'thinking' | 'tool_use', delta: string): BlockOutput[] {
    if (!validIndex(index) || delta === '') return [];
    let block = this.#blocks.get(index);
    if (block === undefined) {
      block = { kind, text: '', done: false, confirmed: false, toolId: '', toolName: '' };
      this.#blocks.set(index, block);
    }
    if (block.done || block.kind !== kind) return [];
    block.text += delta;
    return kind === 'text' ? [{ type: 'text', text: delta }] : [];
  }

  /** `content_block_stop`: a streamed block that no `assistant` line completed yet is released as streamed. */
  stopBlock(index: number): BlockOutput[] {
    const block = this.#blocks.get(index);
    if (block === undefined || block.done) return [];
    return this.#finish(block);
  }

  /**
   * One `assistant` line: the completed blocks of message `messageId`, matched in order to
   * the streamed blocks of the same kind it has not matched yet (it usually comes before
   * `content_block_stop`, but may come after it).
   */
  completed(messageId: string, content: unknown): BlockOutput[] {
    if (!Array.isArray(content)) return [];
    const out: BlockOutput[] = [];
    for (const raw of content as unknown[]) {
      const block = obj(raw);
      if (block === undefined) continue;
      const kind = kindOf(block.type);
      if (kind === 'other') continue;
      const streamed =
        messageId !== '' && messageId === this.#messageId ? this.#openBlock(kind, str(block.id)) : undefined;
      out.push(...this.#complete(kind, block, streamed));
    }
    return out;
  }

  /**
   * Finishes every block of the current message still open (a message cut off, or the run's
   * end): its thinking counts as it stands; a tool_use cut off before its input was complete never ran.
   */
  finishMessage(): BlockOutput[] {
    const out: BlockOutput[] = [];
    for (const index of [...this.#blocks.keys()].sort((a, b) => a - b)) {
      const block = this.#blocks.get(index);
      if (block !== undefined && !block.done && block.kind !== 'tool_use') out.push(...this.#finish(block));
    }
    return out;
  }

  #openBlock(kind: BlockKind, toolId: string): Block | undefined {
    for (const index of [...this.#blocks.keys()].sort((a, b) => a - b)) {
      const block = this.#blocks.get(index);
      if (block === undefined || block.confirmed || block.kind !== kind) continue;
      if (kind === 'tool_use' && block.toolId !== '' && toolId !== '' && block.toolId !== toolId) continue;
      return block;
    }
    return undefined;
  }

  #complete(kind: BlockKind, raw: Record<string, unknown>, streamed: Block | undefined): BlockOutput[] {
    const released = streamed?.done === true;
    if (streamed !== undefined) {
      streamed.done = true;
      streamed.confirmed = true;
    }
    if (kind === 'text') {
      const text = str(raw.text);
      const already = streamed?.text.length ?? 0;
      if (streamed !== undefined) streamed.text = text;
      return text.length > already ? [{ type: 'text', text: text.slice(already) }] : [];
    }
    if (kind === 'thinking') {
      const thinking = str(raw.thinking);
      return thinking === '' || released ? [] : [{ type: 'thinking', text: thinking }];
    }
    const id = str(raw.id) || (streamed?.toolId ?? '');
    return id === ''
      ? []
      : [{ type: 'tool_use', id, name: str(raw.name) || (streamed?.toolName ?? ''), input: raw.input ?? {} }];
  }

  #finish(block: Block): BlockOutput[] {
    block.done = true;
    if (block.kind === 'thinking' && block.text !== '') return [{ type: 'thinking', text: block.text }];
    if (block.kind === 'tool_use' && block.toolId !== '') {
      return [{ type: 'tool_use', id: block.toolId, name: block.toolName, input: parseInput(block.text) }];
    }
    return [];
  }
}

function parseInput(json: string): unknown {
  if (json === '') return {};
  try {
    return JSON.parse(json) as unknown;
  } catch {
    // A partial or broken tool input stays visible as the text it is.
    return { partialJson: json };
  }
}

function kindOf(type: unknown): BlockKind {
  return type === 'text' || type === 'thinking' || type === 'tool_use' ? type : 'other';
}

function validIndex(index: number): boolean {
  return Number.isInteger(index) && index >= 0 && index <= MAX_INDEX;
}
