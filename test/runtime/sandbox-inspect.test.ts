import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { summarize } from '../../src/runtime/inspect.ts';
import type { PiEnv } from '../support/pi-env.ts';
import type { Script } from '../support/fake-model-server.ts';
import { turnEnded, useRuntimeSuite, type Harness } from '../support/runtime.ts';

/**
 * `sessiond inspect` (and GET /api/sessions/{id}) says how each attempt's agent was confined: the
 * worker of this file runs its attempts in bubblewrap (SESSIOND_SANDBOX=bwrap, read once per process
 * when the worker starts), the pi agent reaching its fake model through the egress bridge.
 */

const SCRIPTS: Record<string, Script> = { 'sandbox-hello': () => ({ text: 'Hello from the sandbox.' }) };

let env: PiEnv;
let h: Harness;
const before = process.env.SESSIOND_SANDBOX;

beforeAll(() => {
  process.env.SESSIOND_SANDBOX = 'bwrap';
});
afterAll(() => {
  if (before === undefined) delete process.env.SESSIOND_SANDBOX;
  else process.env.SESSIOND_SANDBOX = before;
});

useRuntimeSuite('sandbox-inspect', { scripts: SCRIPTS }, (s) => {
  ({ env, h } = s);
});

describe('the sandbox of each attempt, as inspect shows it', () => {
  it("an attempt run in bubblewrap is recorded with sandbox 'bwrap' on the session's turn", async () => {
    const worker = await h.startWorker();
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Say hello',
      options: { provider: 'fake', model: 'sandbox-hello', cwd: env.cwd },
    });
    const view = await turnEnded(h.runtime, sessionId);
    expect(view.state).toBe('completed');
    expect(view.context?.turn?.attempts.map((a) => a.sandbox)).toEqual(['bwrap']);
    const summary = summarize(view);
    expect(summary.turn?.attempts).toMatchObject([{ attempt: 1, outcome: 'completed', sandbox: 'bwrap' }]);
    await worker.close();
  });
});
