import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/config.ts';
import { createApp } from '../../../src/interfaces/http/app.ts';
import { QuotaError } from '../../../src/runtime/lifecycle/errors.ts';
import { Runtime } from '../../../src/runtime/runtime.ts';
import {
  agentRecords,
  connector,
  expectWholeLog,
  harness,
  sessionDump,
  TEST_POLICY,
  turnEnded,
  until,
  useRuntimeSuite,
  type Harness,
} from '../../support/runtime.ts';
import type { PiEnv } from '../../support/pi-env.ts';
import type { RedisServer } from '../../support/redis.ts';
import { internals } from '../../../src/runtime/internals.ts';
import { clientOver } from '../../../src/api/bind.ts';

/**
 * Quotas: a session takes at most maxQueuedPrompts waiting prompts (those in its inbox and those its
 * holder has taken into the machine's mailbox) and its log holds at most maxLogMessages messages.
 * Over a limit: a clear error naming it, nothing written, nothing already stored lost.
 */

const LOG_CAP = 30;

let redis: RedisServer;
let env: PiEnv;
let h: Harness;
/** No worker on this prefix: its sessions wait queued. */
let idle: Harness;
const extra: Array<() => Promise<void>> = [];

useRuntimeSuite(
  'quotas',
  {
    scripts: { 'slow-words': { text: Array.from({ length: 80 }, (_, i) => ` w${i}`), chunkDelayMs: 60 } },
    cleanup: async () => {
      for (const close of extra) await close();
      await idle?.close();
    },
  },
  async (s) => {
    ({ redis, env, h } = s);
    await h.startWorker({ maxLogMessages: LOG_CAP });
    idle = harness(redis.url, env, 'quotas-idle');
  },
);

const opts = (model: string) => ({ provider: 'fake', model, cwd: env.cwd });

function limitedRuntime(prefix: string, limits: ConstructorParameters<typeof Runtime>[0]['limits']): Runtime {
  const { connect, closeAll } = connector(redis.url);
  const runtime = new Runtime({ connect, prefix, limits, policy: TEST_POLICY });
  extra.push(async () => {
    await runtime.close();
    closeAll();
  });
  return runtime;
}

describe('quotas', { timeout: 120_000 }, () => {
  it('over the queued-prompt cap: refused naming maxQueuedPrompts, nothing written (HTTP 429)', async () => {
    const runtime = limitedRuntime(idle.prefix, { maxQueuedPrompts: 3 });
    const { sessionId } = await runtime.enqueue({ prompt: 'one', options: opts('text') });
    await runtime.enqueue({ sessionId, prompt: 'two' });
    await runtime.enqueue({ sessionId, prompt: 'three' });
    const before = await sessionDump(internals(runtime).redis, internals(runtime).keys, sessionId);
    const error = await runtime.enqueue({ sessionId, prompt: 'four' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QuotaError);
    expect(error).toMatchObject({ limit: 'maxQueuedPrompts', max: 3, status: 429 });
    expect((error as Error).message).toBe(
      `session "${sessionId}" already has 3 prompts waiting (maxQueuedPrompts 3): the prompt was not stored`,
    );
    expect(await sessionDump(internals(runtime).redis, internals(runtime).keys, sessionId)).toEqual(before);

    const app = createApp({
      client: clientOver(runtime),
      config: loadConfig({ prefix: idle.prefix }, {}),
      logger: pino({ level: 'silent' }),
      dashboard: false,
      bullBoard: false,
    });
    const response = await app.request(`/api/sessions/${sessionId}/prompts`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'five' }),
    });
    expect(response.status).toBe(429);
    expect(await response.json()).toMatchObject({
      limit: 'maxQueuedPrompts',
      max: 3,
      error: expect.stringContaining('maxQueuedPrompts 3'),
    });
    expect(await sessionDump(internals(runtime).redis, internals(runtime).keys, sessionId)).toEqual(before);
  });

  it('prompts a worker has already taken into the mailbox count as waiting; every accepted prompt runs', async () => {
    const runtime = limitedRuntime(h.prefix, { maxQueuedPrompts: 2 });
    const { sessionId } = await runtime.enqueue({ prompt: 'Talk slowly', options: opts('slow-words') });
    await until(async () => (await runtime.getSession(sessionId))?.state === 'running', 30_000, 'turn 1 to run');
    await runtime.enqueue({ sessionId, prompt: 'second', options: opts('text') });
    await runtime.enqueue({ sessionId, prompt: 'third', options: opts('text') });
    // The worker takes them off the inbox into its mailbox: they still wait.
    await until(
      async () => (await internals(runtime).store.inbox(sessionId)).length === 0,
      10_000,
      'the holder to take the prompts',
    );
    await expect(runtime.enqueue({ sessionId, prompt: 'fourth' })).rejects.toMatchObject({ limit: 'maxQueuedPrompts' });
    const done = await turnEnded(runtime, sessionId, 3, 90_000);
    expect(done.context?.turnIndex).toBe(3);
    expect(done.context?.mailbox).toEqual([]);
    // The waiting prompts ran: there is room again.
    expect((await runtime.enqueue({ sessionId, prompt: 'now there is room', options: opts('text') })).turn).toBe(4);
  });

  it('over the message-log cap: the turn ends failed (quota), the agent stopped, nothing stored trimmed, new prompts refused naming maxLogMessages', async () => {
    const { sessionId } = await h.runtime.enqueue({ prompt: 'Talk a lot', options: opts('slow-words') });
    const ended = await turnEnded(h.runtime, sessionId, 1, 60_000);
    expect(ended.state).toBe('failed');
    expect(ended.context?.turn).toMatchObject({ status: 'failed', failureReason: 'not_retryable' });
    const attempt = ended.context?.turn?.attempts[0];
    expect(attempt).toMatchObject({ outcome: 'failed', category: 'quota' });
    expect(attempt?.errorText).toContain(`maxLogMessages ${LOG_CAP}`);
    expect(await agentRecords(sessionId)).toEqual([]);

    const messages = await h.runtime.readMessages(sessionId);
    expectWholeLog(messages);
    expect(messages).toHaveLength(LOG_CAP);
    expect(messages.at(-1)).toMatchObject({ type: 'terminal.failed', content: { category: 'quota' } });
    expect(messages.filter((m) => m.type === 'assistant').length).toBeGreaterThan(10);

    // The deployment's limit, as the worker has it.
    const runtime = limitedRuntime(h.prefix, { maxLogMessages: LOG_CAP });
    const before = await sessionDump(internals(runtime).redis, internals(runtime).keys, sessionId);
    await expect(runtime.enqueue({ sessionId, prompt: 'more' })).rejects.toMatchObject({
      limit: 'maxLogMessages',
      status: 409,
      message: `session "${sessionId}" has ${LOG_CAP} messages stored, its message log is full (maxLogMessages ${LOG_CAP}): the prompt was not stored`,
    });
    expect(await sessionDump(internals(runtime).redis, internals(runtime).keys, sessionId)).toEqual(before);
  });
});
