import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { retriesOf } from '../../../src/agents/acp/qwen-retries.ts';

/**
 * The chat file the real qwen 0.24.4 (`qwen --acp`) wrote for one prompt whose model answered
 * 500, 500, then text (recorded against the fake OpenAI-compatible API): nothing on its ACP stdout
 * or stderr said it retried; only its telemetry events in this file do.
 */
const RECORDING = readFileSync(new URL('../../fixtures/acp/qwen-http500-twice.chat.jsonl', import.meta.url), 'utf8');
const SESSION = 'b7d928b0-1f3e-4c8d-875d-97a0081d6cc0';

describe("qwen's own retries, read from its chat file", () => {
  it('two 500s, then an answer: agent.retry start for each retried request, then end with success', () => {
    expect(retriesOf(RECORDING, SESSION, 0)).toEqual([
      {
        type: 'agent.retry',
        content: { phase: 'start', attempt: 1, errorText: '500 fake internal server error (status 500)' },
      },
      {
        type: 'agent.retry',
        content: { phase: 'start', attempt: 2, errorText: '500 fake internal server error (status 500)' },
      },
      { type: 'agent.retry', content: { phase: 'end', success: true } },
    ]);
  });

  it("events before the attempt began, another session's, or a last request that failed (not retried) are none", () => {
    expect(retriesOf(RECORDING, SESSION, Date.parse('2026-12-02T00:00:00Z'))).toEqual([]);
    expect(retriesOf(RECORDING, 'another-session', 0)).toEqual([]);
    const lastFailed = RECORDING.split('\n')
      .filter((l) => !l.includes('qwen-code.api_response'))
      .join('\n');
    expect(retriesOf(lastFailed, SESSION, 0)).toEqual([
      {
        type: 'agent.retry',
        content: { phase: 'start', attempt: 1, errorText: '500 fake internal server error (status 500)' },
      },
      { type: 'agent.retry', content: { phase: 'end', success: false } },
    ]);
    expect(retriesOf('not json\n{"subtype":"ui_telemetry"}\n', SESSION, 0)).toEqual([]);
  });
});
