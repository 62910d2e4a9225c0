import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { agentEnv } from '../../../src/agents/shared/agent-env.ts';
import { runAgentAttempt, type FinishingMapper } from '../../../src/agents/shared/run-attempt.ts';
import type { CliMessage } from '../../../src/protocol/index.ts';

const PRINT_ENV = fileURLToPath(new URL('../../fixtures/agents/print-env.mjs', import.meta.url));

/** Keeps the lines the process printed; ends completed. */
function keepLines(lines: string[]): FinishingMapper {
  return {
    agentEnded: false,
    push(line) {
      lines.push(line);
      return [];
    },
    complete(): CliMessage[] {
      return [{ type: 'terminal.completed', content: { stopReason: 'stop' } }];
    },
  };
}

async function envSeen(context: { traceparent?: string; tracestate?: string }): Promise<Record<string, string>> {
  const lines: string[] = [];
  // The worker's own trace context (its parent's) is in its environment: the seal must keep it out.
  const env = agentEnv(
    {},
    {
      PATH: process.env.PATH ?? '',
      TRACEPARENT: '00-11111111111111111111111111111111-2222222222222222-01',
      TRACESTATE: 'worker=own',
    },
  );
  for await (const message of runAgentAttempt(
    { command: process.execPath, args: [PRINT_ENV], env },
    keepLines(lines),
    context,
  ))
    void message;
  return JSON.parse(lines[0] ?? '{}') as Record<string, string>;
}

describe('the attempt’s trace context in the agent’s sealed environment', () => {
  it('the agent process gets the attempt’s TRACEPARENT and TRACESTATE, never the worker’s own', async () => {
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const seen = await envSeen({ traceparent, tracestate: 'sessiond=1' });
    expect(seen.TRACEPARENT).toBe(traceparent);
    expect(seen.TRACESTATE).toBe('sessiond=1');
  });

  it('without tracing the agent gets no TRACEPARENT at all', async () => {
    const seen = await envSeen({});
    expect(seen.TRACEPARENT).toBeUndefined();
    expect(seen.TRACESTATE).toBeUndefined();
  });
});
