import { INTERRUPTED_TEXT } from '../../../machines/turn.ts';
import type { CliMessage, MessageOf } from '../../protocol/index.ts';

/** Why an attempt the machine stopped (its signal aborted) ended: what its last messages say. */
export type AttemptStop = { kind: 'cancelled'; reason: string } | { kind: 'timeout'; text: string };

/**
 * The tool calls of one attempt that have no result yet (a `tool.call` without its `tool.completed` or
 * `tool.failed`). When the attempt ends with calls still open (cancelled, failed, its worker gone), each is
 * closed with a `tool.failed` saying why, before the attempt's terminal message: a log reader never sees a
 * call running in an attempt that has ended.
 */
export class OpenToolCalls {
  readonly #open = new Map<string, string>();

  /** Calls started and not ended yet. */
  get size(): number {
    return this.#open.size;
  }

  observe(message: CliMessage): void {
    if (message.type === 'tool.call') this.#open.set(message.content.toolCallId, message.content.name);
    else if (message.type === 'tool.completed' || message.type === 'tool.failed')
      this.#open.delete(message.content.toolCallId);
  }

  /** The `tool.failed` of every call still open (in the order they were called); none is open afterwards. */
  close(error: string): MessageOf<'tool.failed'>[] {
    const closed = [...this.#open].map(([toolCallId, name]): MessageOf<'tool.failed'> => ({
      type: 'tool.failed',
      content: { toolCallId, name, error },
    }));
    this.#open.clear();
    return closed;
  }
}

/** Why a call is closed when its attempt's worker stopped or crashed: the longest reason a close gives. */
export const INTERRUPTED_CALL_ERROR = 'the attempt was interrupted (its worker stopped or crashed)';

/**
 * The largest `tool.failed` sessiond may write to close `call` (the log caps hold room for it while the call
 * is open: store/log-room.ts). Every reason of closedCallError is shorter than the interrupted one.
 */
export function closingOf(call: MessageOf<'tool.call'>): MessageOf<'tool.failed'> {
  const { toolCallId, name } = call.content;
  return { type: 'tool.failed', content: { toolCallId, name, error: INTERRUPTED_CALL_ERROR } };
}

/** The error a tool call left open by its attempt's end is closed with. */
export function closedCallError(end: CliMessage): string {
  if (end.type === 'terminal.cancelled') return 'the attempt was cancelled';
  if (end.type === 'terminal.failed') return `the attempt failed: ${end.content.category}`;
  return 'the attempt ended';
}

/** The terminal message of an attempt the machine stopped: cancelled, or failed at its turn's wall-clock limit. */
export function stoppedTerminal(stop: AttemptStop): MessageOf<'terminal.cancelled'> | MessageOf<'terminal.failed'> {
  if (stop.kind === 'cancelled') return { type: 'terminal.cancelled', content: { reason: stop.reason } };
  return {
    type: 'terminal.failed',
    content: { text: stop.text, category: 'timeout', stderr: '', invalid_output_lines: [] },
  };
}

/** What a restored snapshot says of the attempt it was taken in (running, or stopping on a cancel). */
export interface InterruptedAttempt {
  turn: number;
  attempt: number;
  /** null: it ran (its worker stopped or crashed); else the machine was stopping it. */
  stop: AttemptStop | null;
}

/**
 * The end the log is missing for an attempt its worker left (it stopped or crashed while the attempt ran, or
 * while a cancel waited for it): the tool calls it left open, then its terminal message. Nothing when the
 * attempt's terminal message is already stored (its worker died after writing it).
 */
export function interruptedEnd(
  interrupted: InterruptedAttempt,
  stored: readonly { type: string; content: unknown }[],
): CliMessage[] {
  if (stored.some((m) => m.type.startsWith('terminal.'))) return [];
  const calls = new OpenToolCalls();
  for (const message of stored) {
    if (message.type === 'tool.call' || message.type === 'tool.completed' || message.type === 'tool.failed')
      calls.observe(message as CliMessage);
  }
  const end: CliMessage =
    interrupted.stop === null
      ? {
          type: 'terminal.failed',
          content: { text: INTERRUPTED_TEXT, category: 'process_crash', stderr: '', invalid_output_lines: [] },
        }
      : stoppedTerminal(interrupted.stop);
  const why = interrupted.stop === null ? INTERRUPTED_CALL_ERROR : closedCallError(end);
  return [...calls.close(why), end];
}
