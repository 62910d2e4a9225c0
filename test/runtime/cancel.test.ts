import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { findProcessesByMarker } from '../../src/process/index.ts';
import { DEFAULT_RETRY_POLICY } from '../../src/retry/index.ts';
import { ActiveSession } from '../../src/runtime/session-loop/active-session.ts';
import { EventBus } from '../../src/runtime/event-bus.ts';
import type { Keys } from '../../src/runtime/keys.ts';
import { SharedSessionMachine } from '../../src/runtime/shared-machine.ts';
import { SessionStore, type WriteBatch, type WriteResult } from '../../src/runtime/store/session-store.ts';
import type { SessionWorker } from '../../src/runtime/worker.ts';
import { runCli } from '../support/cli.ts';
import type { FakeModelServer } from '../support/fake-model-server.ts';
import type { PiEnv } from '../support/pi-env.ts';
import type { RedisServer } from '../support/redis.ts';
import {
  BACKENDS,
  expectWholeLog,
  FAST_WORKER,
  harness,
  piHostOptions,
  agentRecords,
  TEST_POLICY,
  turnEnded,
  until,
  type Harness,
  useRuntimeSuite,
  type RuntimeSuite,
} from '../support/runtime.ts';
import { internals } from '../../src/runtime/internals.ts';

/**
 * Cancel from anywhere: from another process while a worker holds the session (pub/sub), for a
 * session nobody holds (the persisted flag, applied at its next activation), and while the
 * session is parked in a long backoff (its activation is run at once, not at nextRetryAt).
 */

const NEVER = 'cancel-never-asked';
const FAILS = 'cancel-500';

let redis: RedisServer;
let server: FakeModelServer;
let env: PiEnv;
let h: Harness;
let cliEnv: RuntimeSuite['cliEnv'];
let worker: SessionWorker | null = null;
/** A second prefix on the same Redis, where the test itself plays the worker. */
let raceH: Harness;

/** `sessiond cancel ID --json` in its own process, configured by env like any operator's shell. */
async function cancelFromAnotherProcess(
  sessionId: string,
  reason: string,
): Promise<{ sessionId: string; delivered: string }> {
  const result = await runCli(['cancel', sessionId, '--json', '--reason', reason], {
    env: cliEnv(),
  });
  expect(result.stderr).toBe('');
  expect(result.exitCode).toBe(0);
  return JSON.parse(result.stdout) as { sessionId: string; delivered: string };
}

/** A store whose first release (a write that gives the lease back) is preceded by `before()`: a cancel landing in that window, deterministically. */
class RacingStore extends SessionStore {
  #before: (() => Promise<void>) | null;
  constructor(redis: Redis, keys: Keys, before: () => Promise<void>) {
    super(redis, keys);
    this.#before = before;
  }
  override async write(sessionId: string, token: string, batch: WriteBatch): Promise<WriteResult> {
    const before = batch.release === undefined ? null : this.#before;
    if (before !== null) {
      this.#before = null;
      await before();
    }
    return super.write(sessionId, token, batch);
  }
}

describe.each(BACKENDS)('cancel from anywhere, on %s Redis', (backend) => {
  useRuntimeSuite(
    `cancel-${backend}`,
    {
      backend,
      scripts: { [NEVER]: { text: 'This turn should never have run.' }, [FAILS]: { status: 500 } },
      cleanup: () => raceH?.close(),
    },
    (s) => {
      ({ redis, server, env, h, cliEnv } = s);
      worker = null;
      raceH = harness(redis.url, env, 'cancel-race');
    },
  );

  // On a cluster too: the cancel from another process (pub/sub across nodes); the rest is the same code.
  if (backend === 'single') {
    it('a session nobody holds: the cancel waits in Redis and ends the turn at its next activation, the agent never asked', async () => {
      const { sessionId } = await h.runtime.enqueue({
        prompt: 'Do not run',
        options: { provider: 'fake', model: NEVER, cwd: env.cwd },
      });
      expect(await h.runtime.cancel(sessionId, 'changed my mind')).toEqual({ delivered: 'activation' });
      const parked = await h.runtime.getSession(sessionId);
      expect(parked).toMatchObject({ state: 'queued', cancelRequested: true, heldBy: null });

      worker = await h.startWorker();
      const session = await turnEnded(h.runtime, sessionId);
      expect(session.state).toBe('cancelled');
      expect(session.context?.turn).toMatchObject({ index: 1, status: 'cancelled', cancelReason: 'changed my mind' });
      expect(session.cancelRequested).toBe(false);
      expect(server.requestsFor(NEVER)).toEqual([]);
      expect(await agentRecords(sessionId)).toEqual([]);
      expectWholeLog(await h.runtime.readMessages(sessionId));

      // The cancel was spent on that turn: the next prompt runs.
      server.setScript(NEVER, { text: 'Now it runs.' });
      await h.runtime.enqueue({ sessionId, prompt: 'Now run' });
      expect((await turnEnded(h.runtime, sessionId, 2)).state).toBe('completed');
    });
  }

  it('from a separate process during a long bash tool: the turn ends cancelled, partial output stays, no process of the tree is left', async () => {
    if (worker === null) worker = await h.startWorker();
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Sleep a long time',
      options: { provider: 'fake', model: 'long-tool-grandchild', cwd: env.cwd },
    });
    await until(
      async () => (await h.runtime.readMessages(sessionId)).some((m) => m.type === 'tool.call'),
      30_000,
      'the long tool to start',
    );
    const [record] = await until(async () => {
      const records = await agentRecords(sessionId);
      return records[0]?.pid != null ? records : null;
    });
    if (record === undefined) throw new Error('no agent process recorded');
    // pi, bash and its two background sleeps (grandchildren of pi).
    await until(
      async () => (await findProcessesByMarker(record.marker)).length >= 4,
      10_000,
      'the tool’s process tree',
    );
    const before = await h.runtime.readMessages(sessionId);

    expect(await cancelFromAnotherProcess(sessionId, 'operator says stop')).toEqual({ sessionId, delivered: 'worker' });

    const session = await turnEnded(h.runtime, sessionId);
    expect(session.state).toBe('cancelled');
    expect(session.context?.turn).toMatchObject({ status: 'cancelled', cancelReason: 'operator says stop' });
    expect(session.context?.turn?.attempts.map((a) => a.outcome)).toEqual(['cancelled']);
    expect(session.cancelRequested).toBe(false);
    expect(await findProcessesByMarker(record.marker)).toEqual([]);
    expect(await agentRecords(sessionId)).toEqual([]);

    // What was emitted before the cancel is still there, in order, and the log is whole.
    const after = await h.runtime.readMessages(sessionId);
    expectWholeLog(after);
    expect(after.slice(0, before.length)).toEqual(before);
    expect(after.map((m) => m.type)).toEqual(expect.arrayContaining(['session.started', 'tool.call']));
    // The attempt ends once in the log: the running bash call closed as failed, then the cancel.
    const call = after.find((m) => m.type === 'tool.call');
    const { toolCallId } = call?.content as { toolCallId: string };
    expect(after.slice(-2).map((m) => [m.type, m.attempt])).toEqual([
      ['tool.failed', 1],
      ['terminal.cancelled', 1],
    ]);
    expect(after.at(-2)?.content).toMatchObject({ toolCallId, error: 'the attempt was cancelled' });
    expect(after.at(-1)?.content).toEqual({ reason: 'operator says stop' });
    expect(after.filter((m) => m.type.startsWith('terminal.'))).toHaveLength(1);
    expect(after.filter((m) => m.type === 'tool.call' || m.type === 'tool.failed').length % 2).toBe(0);

    // A log reader sees the same end: `watch --json` in its own process, and its text form.
    const watched = await runCli(['watch', sessionId, '--json'], { env: cliEnv() });
    expect(watched.exitCode).toBe(0);
    const lines = watched.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { type: string; content: unknown });
    expect(lines.at(-1)).toMatchObject({ type: 'terminal.cancelled', content: { reason: 'operator says stop' } });
    const text = await runCli(['watch', sessionId], { env: cliEnv() });
    expect(text.exitCode).toBe(0);
    expect(text.stdout).toContain('── attempt 1 cancelled: operator says stop');
  });

  if (backend === 'single') {
    it('during a long backoff: the parked session is cancelled at once, with no second model request', async () => {
      if (worker === null) worker = await h.startWorker();
      const { sessionId } = await h.runtime.enqueue({
        prompt: 'Fail once',
        options: { provider: 'fake', model: FAILS, cwd: env.cwd },
        retryPolicy: { initialDelayMs: 60_000, maxDelayMs: 60_000, jitter: 'none', maxAttempts: 3 },
      });
      // The first attempt fails (500): the session parks until nextRetryAt, holding no worker slot.
      const parked = await until(
        async () => {
          const s = await h.runtime.getSession(sessionId);
          return s?.state === 'backoff' && s.heldBy === null ? s : null;
        },
        30_000,
        'the session to park in backoff',
      );
      expect(parked.context?.nextRetryAt).toBeGreaterThan(Date.now() + 30_000);
      expect(worker.activeSessions).not.toContain(sessionId);
      const jobId = await internals(h.runtime).store.activeJobId(sessionId);
      expect(await (await internals(h.runtime).queue.queue.getJob(jobId ?? ''))?.isDelayed()).toBe(true);

      expect(await cancelFromAnotherProcess(sessionId, 'no more retries')).toEqual({
        sessionId,
        delivered: 'activation',
      });

      // Far sooner than the 60 s backoff: the cancel promotes the parked activation.
      const session = await turnEnded(h.runtime, sessionId, 1, 20_000);
      expect(session.state).toBe('cancelled');
      expect(session.context?.turn).toMatchObject({ status: 'cancelled', cancelReason: 'no more retries' });
      expect(session.context?.turn?.attempts.map((a) => [a.outcome, a.category])).toEqual([['failed', 'server_error']]);
      expect(session.context?.nextRetryAt).toBeNull();
      expect(server.requestsFor(FAILS)).toHaveLength(1);
      expectWholeLog(await h.runtime.readMessages(sessionId));
    });

    it('a cancel that lands just as the holder lets go of a finished turn is handled there, not left to cancel the next prompt', async () => {
      const { runtime, connect } = raceH;
      const { sessionId } = await runtime.enqueue({
        prompt: 'Quick one',
        options: { provider: 'fake', model: 'text', cwd: env.cwd },
      });
      // The test drives the session as a worker would, with a store that lets a cancel in right
      // before its release: the lease is still held, so the cancel is told to this holder only.
      let delivered: string | null = null;
      const store = new RacingStore(connect('race-holder'), internals(runtime).keys, async () => {
        delivered = (await runtime.cancel(sessionId, 'too late')).delivered;
      });
      const bus = new EventBus(connect('race-events'), store.redis, internals(runtime).keys);
      await bus.start();
      const lease = await store.acquire(sessionId, 'race-holder', 60_000);
      if (!lease.ok) throw new Error('no lease');
      const session = new ActiveSession({
        store,
        bus,
        sessionId,
        token: lease.token,
        config: {
          agentOptions: { pi: piHostOptions(env, raceH.stateDir) },
          holdBackoffMs: FAST_WORKER.holdBackoffMs,
          pollMs: FAST_WORKER.pollMs,
          policy: TEST_POLICY,
        },
        globalPolicy: () => Promise.resolve(DEFAULT_RETRY_POLICY),
        machine: new SharedSessionMachine(),
      });
      expect(await session.drive()).toEqual({ kind: 'released' });
      expect(delivered).toBe('worker');
      // The turn had completed; the cancel had nothing to stop, and it is spent, not left behind.
      const after = await runtime.getSession(sessionId);
      expect(after).toMatchObject({ state: 'completed', cancelRequested: false, heldBy: null });

      // So the next prompt runs (a leftover cancel would end it cancelled at once).
      await raceH.startWorker();
      await runtime.enqueue({ sessionId, prompt: 'Next one' });
      expect((await turnEnded(runtime, sessionId, 2)).state).toBe('completed');
    });
  }
});
