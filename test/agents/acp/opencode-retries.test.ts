import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { retriesInLog } from '../../../src/agents/acp/opencode-retries.ts';

/**
 * The lines of one session in the log the real opencode 1.18.33 (`opencode acp`) wrote for a
 * prompt whose model answered 500, 500, then text (recorded against the fake OpenAI-compatible
 * API; its title request is `small=true`): nothing over ACP said it retried; only this log does.
 */
const RECORDING = readFileSync(new URL('../../fixtures/acp/opencode-http500-twice.log', import.meta.url), 'utf8');
const SESSION = 'ses_dcdbf4eafffej8TT7LZibrkW5N';
const ERROR = 'AI_APICallError: fake internal server error';

describe("OpenCode's own retries, read from its log", () => {
  it('two 500s, then an answer: agent.retry start for each retried request, then end with success', () => {
    expect(retriesInLog(RECORDING, SESSION, 0)).toEqual([
      { type: 'agent.retry', content: { phase: 'start', attempt: 1, errorText: ERROR } },
      { type: 'agent.retry', content: { phase: 'start', attempt: 2, errorText: ERROR } },
      { type: 'agent.retry', content: { phase: 'end', success: true } },
    ]);
  });

  it("lines before the attempt began, another session's, or a last request that failed (not retried) are none", () => {
    expect(retriesInLog(RECORDING, SESSION, Date.parse('2026-12-02T00:00:00Z'))).toEqual([]);
    expect(retriesInLog(RECORDING, 'ses_other', 0)).toEqual([]);
    const lines = RECORDING.trimEnd().split('\n');
    expect(retriesInLog(lines.slice(0, -1).join('\n'), SESSION, 0)).toEqual([
      { type: 'agent.retry', content: { phase: 'start', attempt: 1, errorText: ERROR } },
      { type: 'agent.retry', content: { phase: 'end', success: false } },
    ]);
  });
});
