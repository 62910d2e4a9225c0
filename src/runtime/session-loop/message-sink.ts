import type { MessageSink } from '../../../machines/types.ts';
import type { SessionWriter } from '../session-writer.ts';
import type { SessionTracer } from '../tracing/session-tracer.ts';
import { tell, type SessionEvents, type WarnLog } from './config.ts';
import { countUsage } from './usage.ts';

export interface SinkInit {
  sessionId: string;
  writer: SessionWriter;
  tracer: SessionTracer | null;
  events: SessionEvents | undefined;
  /** The agent and model of the current turn (the labels of its tokens). */
  usageLabels: () => { agent: string; model: string };
  warn: WarnLog;
}

/** Where every message of the session's attempts goes: the fenced writer, with its usage counted and failures told. */
export class SessionSink {
  /** `turn/attempt` of the last attempt whose agent reported its turn completed (its terminal.completed went to the log). */
  answered: string | null = null;
  readonly #init: SinkInit;

  constructor(init: SinkInit) {
    this.#init = init;
  }

  readonly sink: MessageSink = (message, meta) => {
    const { writer, events, sessionId, warn } = this.#init;
    if (message.type === 'terminal.completed') {
      this.answered = `${meta.turn}/${meta.attempt}`;
      countUsage(message, meta, this.#init.usageLabels(), writer, this.#init.tracer);
    }
    if (message.type === 'terminal.failed' && events?.attemptFailed !== undefined) {
      const { category, text } = message.content;
      tell(warn, () => events.attemptFailed?.({ sessionId, turn: meta.turn, attempt: meta.attempt, category, text }));
    }
    return writer.message(meta.turn, meta.attempt, message.type, message.content);
  };
}
