import { describe, expect, it } from 'vitest';
import { interruptedEnd, OpenToolCalls } from '../../../src/runtime/session-loop/attempt-end.ts';

/** The end an attempt's log is given when the agent does not say it (pure logic; the runtime tests run it for real). */

const call = (toolCallId: string) => ({ type: 'tool.call', content: { toolCallId, name: 'bash', arguments: {} } });
const INTERRUPTED = 'the attempt was interrupted (its worker stopped or crashed)';

describe('OpenToolCalls', () => {
  it('closes only the calls without a result, in the order they were called, and each once', () => {
    const calls = new OpenToolCalls();
    for (const m of [call('a'), call('b'), call('c')]) calls.observe(m as never);
    calls.observe({ type: 'tool.completed', content: { toolCallId: 'b', name: 'bash', result: 'ok' } });
    expect(calls.close('why')).toEqual([
      { type: 'tool.failed', content: { toolCallId: 'a', name: 'bash', error: 'why' } },
      { type: 'tool.failed', content: { toolCallId: 'c', name: 'bash', error: 'why' } },
    ]);
    expect(calls.close('again')).toEqual([]);
  });
});

describe('interruptedEnd', () => {
  it('an attempt whose worker died while it ran: its open call closed, then terminal.failed process_crash', () => {
    expect(interruptedEnd({ turn: 1, attempt: 2, stop: null }, [call('a')])).toEqual([
      { type: 'tool.failed', content: { toolCallId: 'a', name: 'bash', error: INTERRUPTED } },
      {
        type: 'terminal.failed',
        content: { text: INTERRUPTED, category: 'process_crash', stderr: '', invalid_output_lines: [] },
      },
    ]);
  });

  it('one whose worker died while a cancel waited for it: terminal.cancelled with the reason; at the limit: a timeout', () => {
    expect(interruptedEnd({ turn: 1, attempt: 1, stop: { kind: 'cancelled', reason: 'stop' } }, [call('a')])).toEqual([
      { type: 'tool.failed', content: { toolCallId: 'a', name: 'bash', error: 'the attempt was cancelled' } },
      { type: 'terminal.cancelled', content: { reason: 'stop' } },
    ]);
    expect(interruptedEnd({ turn: 1, attempt: 1, stop: { kind: 'timeout', text: 'limit' } }, [])).toEqual([
      {
        type: 'terminal.failed',
        content: { text: 'limit', category: 'timeout', stderr: '', invalid_output_lines: [] },
      },
    ]);
  });

  it('nothing when the attempt already ended in the log (its worker died after writing the terminal)', () => {
    const stored = [call('a'), { type: 'terminal.completed', content: { stopReason: 'stop' } }];
    expect(interruptedEnd({ turn: 1, attempt: 1, stop: null }, stored)).toEqual([]);
  });
});
