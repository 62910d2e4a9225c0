import { describe, expect, it } from 'vitest';
import { SessionSink } from '../../../src/runtime/session-loop/message-sink.ts';
import type { SessionWriter } from '../../../src/runtime/session-writer.ts';
import type { CliMessage } from '../../../src/protocol/index.ts';

/**
 * The sink's part of a completed end's record (pure logic: a writer that lists what is queued; the runtime test
 * test/runtime/workspaces-cancel-race.test.ts runs it for real): the record an attempt hands it is queued with that
 * attempt's terminal.completed, just before it, and never otherwise.
 */

function sinkWithLog(): { sink: SessionSink; queued: string[] } {
  const queued: string[] = [];
  const writer = {
    message: (turn: number, attempt: number, type: string) => {
      queued.push(`${turn}/${attempt} ${type}`);
      return undefined;
    },
    usage: () => undefined,
  } as unknown as SessionWriter;
  const sink = new SessionSink({
    sessionId: 's',
    writer,
    tracer: null,
    events: undefined,
    usageLabels: () => ({ agent: 'pi', model: 'm' }),
    warn: () => undefined,
  });
  return { sink, queued };
}

const completed: CliMessage = { type: 'terminal.completed', content: { stopReason: 'end_turn' } };
const text: CliMessage = { type: 'assistant', content: { text: 'hi' } };
const meta = (turn: number, attempt: number) => ({ sessionId: 's', turn, attempt });

describe('SessionSink: what an attempt records with its completed end', () => {
  it('is queued just before that attempt’s terminal.completed, once', () => {
    const { sink, queued } = sinkWithLog();
    sink.setAnswerRecord(2, 1, () => queued.push('record'));
    void sink.sink(text, meta(2, 1));
    void sink.sink(completed, meta(2, 1));
    void sink.sink(completed, meta(2, 1));
    expect(queued).toEqual(['2/1 assistant', 'record', '2/1 terminal.completed', '2/1 terminal.completed']);
    expect(sink.answered).toBe('2/1');
  });

  it('is not queued with another attempt’s terminal.completed, nor once forgotten (the attempt ended without it)', () => {
    const { sink, queued } = sinkWithLog();
    sink.setAnswerRecord(2, 1, () => queued.push('record'));
    void sink.sink(completed, meta(2, 2));
    sink.setAnswerRecord(2, 1, null);
    void sink.sink(completed, meta(2, 1));
    expect(queued).toEqual(['2/2 terminal.completed', '2/1 terminal.completed']);
  });
});
