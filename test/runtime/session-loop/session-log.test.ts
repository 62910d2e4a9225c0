import { describe, expect, it } from 'vitest';
import { sessionLog } from '../../../src/runtime/session-loop/config.ts';

/** The session loop's warning lines (config.ts): the session named, the error only when one was given. */

describe('sessionLog', () => {
  const lines: Array<[string, string, Record<string, unknown> | undefined]> = [];
  const warn = sessionLog((level, message, fields) => lines.push([level, message, fields]), 's-1');

  it('omits the error field when no error is passed', () => {
    lines.length = 0;
    warn('the workspace pointer did not parse', null);
    warn('a tool result not recorded', undefined, { turn: 2 });
    expect(lines).toEqual([
      ['warn', 'the workspace pointer did not parse', { sessionId: 's-1' }],
      ['warn', 'a tool result not recorded', { sessionId: 's-1', turn: 2 }],
    ]);
  });

  it("gives an Error's message, and anything else as text", () => {
    lines.length = 0;
    warn('a write failed', new Error('READONLY'), { attempt: 1 });
    warn('a listener threw', 'boom');
    expect(lines).toEqual([
      ['warn', 'a write failed', { sessionId: 's-1', error: 'READONLY', attempt: 1 }],
      ['warn', 'a listener threw', { sessionId: 's-1', error: 'boom' }],
    ]);
  });

  it('writes nothing without a log', () => {
    expect(() => sessionLog(undefined, 's-1')('nothing', new Error('x'))).not.toThrow();
  });
});
