import { isTerminal, type CliMessage } from '../../protocol/index.ts';
import type { SessionStore } from './session-store.ts';

/** What a session's message log may hold: messages (maxLogMessages) and bytes of content (maxLogBytes); 0: no limit. */
export interface LogCaps {
  maxLogMessages?: number;
  maxLogBytes?: number;
}

/** The JSON of each content object sized for the log, kept until the session writer stores it (serialised once). */
const serialised = new WeakMap<object, string>();

/** A message content's JSON as the log stores it; a content object serialised once, by whichever of LogRoom and the session writer asks first. */
export function contentJson(content: unknown): string {
  if (typeof content !== 'object' || content === null) return JSON.stringify(content ?? null);
  let json = serialised.get(content);
  if (json === undefined) {
    json = JSON.stringify(content);
    serialised.set(content, json);
  }
  return json;
}

/** A message's size as the log stores it (the JSON of its content, as the session writer sends it). */
export function messageBytes(message: CliMessage): number {
  return Buffer.byteLength(contentJson(message.content), 'utf8');
}

/**
 * The room left in a session's log for one attempt. One message slot is kept for the terminal
 * message that says the log is full; a terminal message always goes in (so the log may pass
 * maxLogBytes by that one message). Contract: `admit` says whether a message may be stored; once it
 * says no, the attempt stops and `fullMessage()` ends it (category `quota`), nothing stored removed.
 */
export class LogRoom {
  #messages: number;
  #bytes: number;
  #reason: string | null = null;
  /** The bytes held back for each open tool call's closing `tool.failed` (one message slot each, too). */
  readonly #reserved = new Map<string, number>();
  readonly #caps: LogCaps;

  private constructor(caps: LogCaps, messages: number, bytes: number) {
    this.#caps = caps;
    this.#messages = messages;
    this.#bytes = bytes;
  }

  static async open(store: SessionStore, sessionId: string, caps: LogCaps): Promise<LogRoom> {
    const maxMessages = caps.maxLogMessages ?? 0;
    const maxBytes = caps.maxLogBytes ?? 0;
    const [seq, bytes] = await Promise.all([
      maxMessages > 0 ? store.lastSeq(sessionId) : 0,
      maxBytes > 0 ? store.logBytes(sessionId) : 0,
    ]);
    const room = new LogRoom(
      caps,
      maxMessages > 0 ? maxMessages - 1 - seq : Number.POSITIVE_INFINITY,
      maxBytes > 0 ? maxBytes - bytes : Number.POSITIVE_INFINITY,
    );
    if (room.#messages <= 0) room.#reason = `maxLogMessages ${maxMessages}`;
    else if (room.#bytes <= 0) room.#reason = `maxLogBytes ${maxBytes}`;
    return room;
  }

  /** The log is full already: the attempt must not start. */
  get full(): boolean {
    return this.#reason !== null;
  }

  /**
   * Whether `message` may be stored. A `tool.call` given its `closing` (the `tool.failed` sessiond writes if
   * the attempt ends with the call open) is admitted only with room for both: the closing message's slot and
   * bytes are held until the call's result comes (the held room then goes to it) or `settle` stores the close.
   */
  admit(message: CliMessage, closing?: CliMessage): boolean {
    const terminal = isTerminal(message);
    if (message.type === 'tool.completed' || message.type === 'tool.failed') this.#release(message.content.toolCallId);
    const size = messageBytes(message);
    const held = closing === undefined ? 0 : messageBytes(closing);
    const slots = closing === undefined ? 1 : 2;
    if (!terminal) {
      if (this.#messages < slots) this.#reason = `maxLogMessages ${this.#caps.maxLogMessages ?? 0}`;
      else if (size + held > this.#bytes) this.#reason = `maxLogBytes ${this.#caps.maxLogBytes ?? 0}`;
      if (this.#reason !== null) return false;
    }
    this.#messages -= 1;
    this.#bytes -= size;
    if (closing !== undefined && message.type === 'tool.call') {
      this.#release(message.content.toolCallId);
      this.#messages -= 1;
      this.#bytes -= held;
      this.#reserved.set(message.content.toolCallId, held);
    }
    return true;
  }

  /** Counts a `tool.failed` sessiond writes to close an open call: in the room held for it when the call came. */
  settle(close: CliMessage): void {
    if (close.type === 'tool.failed') this.#release(close.content.toolCallId);
    this.#messages -= 1;
    this.#bytes -= messageBytes(close);
  }

  #release(toolCallId: string): void {
    const held = this.#reserved.get(toolCallId);
    if (held === undefined) return;
    this.#reserved.delete(toolCallId);
    this.#messages += 1;
    this.#bytes += held;
  }

  /** The terminal message of an attempt stopped because the log is full. */
  fullMessage(): CliMessage {
    return {
      type: 'terminal.failed',
      content: {
        text: `the session's message log is full (${this.#reason ?? 'maxLogMessages'}): the attempt was stopped; nothing stored was removed, and the session takes no new prompt`,
        category: 'quota',
        stderr: '',
        invalid_output_lines: [],
      },
    };
  }
}
