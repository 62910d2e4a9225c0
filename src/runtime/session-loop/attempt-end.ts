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
