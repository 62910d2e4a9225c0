import { describe, expect, it } from 'vitest';
import type { SessionWorker } from '../../src/runtime/worker.ts';
import type { PiEnv } from '../../test/support/pi-env.ts';
import { expectWholeLog, turnEnded, type Harness, useRuntimeSuite } from '../support/runtime.ts';

/**
 * Every attempt ends once in the log (issue 28): a tool call still running when its attempt ends is
 * closed with a `tool.failed` saying why, before the attempt's one terminal message. (A cancel and
 * the turn's wall-clock limit: cancel.test.ts, turn-timeout.test.ts; an agent that leaves its calls
 * open on failure: test/api/client.test.ts.)
 */

/** The agent's bash tool kills pi itself (SIGKILL): the attempt fails while that call runs. */
const KILLS_AGENT = 'attempt-end-kills-agent';

let env: PiEnv;
let h: Harness;
let worker: SessionWorker | null = null;

useRuntimeSuite(
  'attempt-end',
  { scripts: { [KILLS_AGENT]: { toolCalls: [{ name: 'bash', arguments: { command: 'kill -9 $PPID; sleep 30' } }] } } },
  (s) => {
    ({ env, h } = s);
    worker = null;
  },
);

function types(messages: readonly { type: string }[]): string[] {
  return messages.map((m) => m.type);
}

describe('the end of an attempt in the log', () => {
  it('a failed attempt with a tool call still running: tool.failed for that call, then exactly one terminal.failed', async () => {
    worker ??= await h.startWorker();
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Run the command',
      options: { provider: 'fake', model: KILLS_AGENT, cwd: env.cwd },
      retryPolicy: { maxAttempts: 1 },
    });
    const session = await turnEnded(h.runtime, sessionId, 1, 30_000);
    expect(session.state).toBe('failed');
    expect(session.context?.turn?.attempts.map((a) => [a.outcome, a.category])).toEqual([['failed', 'process_crash']]);

    const log = await h.runtime.readMessages(sessionId);
    expectWholeLog(log);
    const call = log.find((m) => m.type === 'tool.call');
    expect(call?.content).toMatchObject({ name: 'bash' });
    const { toolCallId } = call?.content as { toolCallId: string };
    expect(types(log).slice(-2)).toEqual(['tool.failed', 'terminal.failed']);
    // pi's mapper closes the call itself (as every CLI agent's does); sessiond adds no second tool.failed.
    expect(log.at(-2)?.content).toEqual({
      toolCallId,
      name: 'bash',
      error: 'the agent ended before reporting this tool result',
    });
    expect(log.at(-1)?.content).toMatchObject({ category: 'process_crash' });
    expect(log.filter((m) => m.type.startsWith('terminal.'))).toHaveLength(1);
    expect(
      log.filter((m) => m.type === 'tool.failed' && (m.content as { toolCallId: string }).toolCallId === toolCallId),
    ).toHaveLength(1);
  });
});
