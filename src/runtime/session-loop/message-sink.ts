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
  /**
   * What an attempt records with its completed end (its workspace's pointer, the agent's state, the turn's point),
   * by `turn/attempt`: queued in the same write as its terminal.completed, and only if that is stored (setAnswerRecord).
   */
  readonly #answerRecords = new Map<string, () => void>();

  constructor(init: SinkInit) {
    this.#init = init;
  }

  readonly sink: MessageSink = (message, meta) => {
    const { writer, events, sessionId, warn } = this.#init;
    if (message.type === 'terminal.completed') {
      const key = `${meta.turn}/${meta.attempt}`;
      this.answered = key;
      // Queued now, with the message below: the batch that stores the answer stores what goes with it, and no other.
      const record = this.#answerRecords.get(key);
      this.#answerRecords.delete(key);
      record?.();
      countUsage(message, meta, this.#init.usageLabels(), writer, this.#init.tracer);
    }
    if (message.type === 'terminal.failed' && events?.attemptFailed !== undefined) {
      const { category, text } = message.content;
      tell(warn, () => events.attemptFailed?.({ sessionId, turn: meta.turn, attempt: meta.attempt, category, text }));
    }
    return writer.message(meta.turn, meta.attempt, message.type, message.content);
  };

  /**
   * `record` queues what attempt `turn/attempt` records with its completed end; it runs when (and only if) that
   * attempt's terminal.completed reaches this sink, in the same synchronous step that marks it `answered`. The
   * attempt actor drops a terminal.completed once the machine has stopped the attempt (a cancel, the turn's limit),
   * so a completed end the log does not store is never recorded either. null: forget it (the attempt has ended).
   */
  setAnswerRecord(turn: number, attempt: number, record: (() => void) | null): void {
    const key = `${turn}/${attempt}`;
    if (record === null) this.#answerRecords.delete(key);
    else this.#answerRecords.set(key, record);
  }
}
