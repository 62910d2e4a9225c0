import { describe, expect, it } from 'vitest';
import { DEFAULT_RETRY_POLICY } from '../../src/retry/index.ts';
import { DEFAULT_TEXT, type FakeModelServer } from '../support/fake-model-server.ts';
import type { PiEnv } from '../support/pi-env.ts';
import {
  BACKENDS,
  assistantText,
  expectWholeLog,
  turnEnded,
  until,
  type Harness,
  useRuntimeSuite,
} from '../support/runtime.ts';
import { internals } from '../../src/runtime/internals.ts';

/**
 * Durable backoff and the retry policy's configuration: a session waiting out a long backoff
 * holds no worker slot (its job is delayed in BullMQ until nextRetryAt) and is retried on time
 * even when every worker was replaced meanwhile; the global policy in Redis reaches running
 * workers without a restart; a per-session override at enqueue wins over it.
 */

const FLAKY = 'backoff-500-then-text';
const FLAKY_2 = 'backoff-500-then-text-2';
const ALWAYS_500 = 'backoff-always-500';

let server: FakeModelServer;
let env: PiEnv;
let h: Harness;

describe.each(BACKENDS)('durable backoff, on %s Redis', (backend) => {
  useRuntimeSuite(
    `backoff-${backend}`,
    {
      backend,
      scripts: {
        [FLAKY]: [{ status: 500 }, { text: DEFAULT_TEXT }],
        [FLAKY_2]: [{ status: 500 }, { text: DEFAULT_TEXT }],
        [ALWAYS_500]: { status: 500 },
      },
    },
    (s) => {
      ({ server, env, h } = s);
    },
  );

  const BACKOFF_MS = backend === 'cluster' ? 8000 : 4000;

  it('a long backoff holds no worker slot, and the retry fires at nextRetryAt though every worker was replaced meanwhile', async () => {
    const first = await h.startWorker({ holdBackoffMs: 1500 });
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Try again later',
      options: { provider: 'fake', model: FLAKY, cwd: env.cwd },
      // Long enough to replace the worker before it ends (a cluster client takes longer to connect).
      retryPolicy: { initialDelayMs: BACKOFF_MS, maxDelayMs: BACKOFF_MS, jitter: 'none', maxAttempts: 3 },
    });

    const parked = await until(
      async () => {
        const s = await h.runtime.getSession(sessionId);
        return s?.state === 'backoff' && s.heldBy === null ? s : null;
      },
      30_000,
      'the session to park in backoff',
    );
    const nextRetryAt = parked.context?.nextRetryAt;
    if (nextRetryAt == null) throw new Error('no nextRetryAt');
    expect(parked.context?.turn?.attempts.map((a) => [a.outcome, a.category, a.delayMs])).toEqual([
      ['failed', 'server_error', BACKOFF_MS],
    ]);
    // No worker slot: the worker drives nothing, and the activation waits in BullMQ as a delayed job.
    expect(first.activeSessions).toEqual([]);
    const jobId = await internals(h.runtime).store.activeJobId(sessionId);
    if (jobId === null) throw new Error('no activation');
    const job = await internals(h.runtime).queue.queue.getJob(jobId);
    expect(await job?.isDelayed()).toBe(true);
    expect((await internals(h.runtime).queue.queue.getDelayed()).map((j) => j.id)).toEqual([jobId]);

    // Every worker goes away; a new one starts while the backoff still runs.
    await first.close(2000);
    const second = await h.startWorker({ holdBackoffMs: 1500 });
    expect(Date.now()).toBeLessThan(nextRetryAt);

    const session = await turnEnded(h.runtime, sessionId, 1, 30_000);
    expect(session.state).toBe('completed');
    const attempts = session.context?.turn?.attempts ?? [];
    expect(attempts.map((a) => a.outcome)).toEqual(['failed', 'completed']);
    // Not before its time (the delay survived the restart), and by the new worker.
    expect(attempts[1]?.startedAt).toBeGreaterThanOrEqual(nextRetryAt);
    expect(server.requestsFor(FLAKY)).toHaveLength(2);
    const messages = await h.runtime.readMessages(sessionId);
    expectWholeLog(messages);
    expect(assistantText(messages.filter((m) => m.attempt === 2))).toBe(DEFAULT_TEXT);
    expect(second.activeSessions).toEqual([]);
  });

  it('the global policy set in Redis reaches a running worker without a restart; a per-session override wins over it', async () => {
    // The running worker has read (and cached) the default policy.
    const plain = await h.runtime.enqueue({
      prompt: 'hello',
      options: { provider: 'fake', model: 'text', cwd: env.cwd },
    });
    expect((await turnEnded(h.runtime, plain.sessionId)).context?.policy).toEqual(DEFAULT_RETRY_POLICY);

    const set = await h.runtime.setPolicy({ maxAttempts: 1 });
    expect(set).toMatchObject({ ok: true, policy: { maxAttempts: 1 } });
    expect(await h.runtime.getPolicy()).toMatchObject({ source: 'global', policy: { maxAttempts: 1 } });

    // A new session under the global policy: one attempt, no retry.
    const global = await h.runtime.enqueue({
      prompt: 'fail',
      options: { provider: 'fake', model: ALWAYS_500, cwd: env.cwd },
    });
    const failed = await turnEnded(h.runtime, global.sessionId);
    expect(failed.state).toBe('failed');
    expect(failed.context?.policy.maxAttempts).toBe(1);
    expect(failed.context?.turn).toMatchObject({ status: 'failed', failureReason: 'attempts_exhausted' });
    expect(failed.context?.turn?.attempts).toHaveLength(1);
    expect(server.requestsFor(ALWAYS_500)).toHaveLength(1);

    // The override given at enqueue wins over the global policy.
    const override = await h.runtime.enqueue({
      prompt: 'retry me',
      options: { provider: 'fake', model: FLAKY_2, cwd: env.cwd },
      retryPolicy: { maxAttempts: 2, initialDelayMs: 100, jitter: 'none' },
    });
    expect(await h.runtime.getPolicy(override.sessionId)).toMatchObject({
      source: 'session',
      policy: { maxAttempts: 2, initialDelayMs: 100 },
    });
    const retried = await turnEnded(h.runtime, override.sessionId);
    expect(retried.state).toBe('completed');
    expect(retried.context?.policy).toMatchObject({ maxAttempts: 2, initialDelayMs: 100 });
    expect(retried.context?.turn?.attempts.map((a) => a.outcome)).toEqual(['failed', 'completed']);
    expect(server.requestsFor(FLAKY_2)).toHaveLength(2);

    // Back to the default: the next turn of the first session runs under it again.
    await h.runtime.resetPolicy();
    expect(await h.runtime.getPolicy()).toMatchObject({ source: 'default' });
    await h.runtime.enqueue({
      sessionId: global.sessionId,
      prompt: 'again',
      options: { provider: 'fake', model: 'text', cwd: env.cwd },
    });
    const again = await turnEnded(h.runtime, global.sessionId, 2);
    expect(again.state).toBe('completed');
    expect(again.context?.policy).toEqual(DEFAULT_RETRY_POLICY);
  }, 120_000);
});
