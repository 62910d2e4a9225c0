import { describe, expect, it } from 'vitest';
import { findProcessesByMarker } from '../../src/process/index.ts';
import { markerScope, reapOrphans } from '../../src/runtime/orphans.ts';
import { hasToolResult, type FakeModelServer } from '../support/fake-model-server.ts';
import type { PiEnv } from '../support/pi-env.ts';
import {
  assistantText,
  expectWholeLog,
  agentRecords,
  turnEnded,
  until,
  type Harness,
  useRuntimeSuite,
} from '../support/runtime.ts';
import { killAllWorkerProcesses, startWorkerProcess, type WorkerProcessOptions } from '../support/worker-process.ts';
import { internals } from '../../src/runtime/internals.ts';

/**
 * Graceful shutdown of a `sessiond worker` process (SIGTERM): it stops taking jobs, lets running
 * attempts go on up to SESSIOND_SHUTDOWN_GRACE, then stops them (their process trees gone) and
 * leaves them to be recorded as interrupted and retried by another worker. Exit code 0.
 */

/** First request: bash `sleep 1000`; a retry (a fresh request without a tool result) answers. */
const TOOL_ONCE = 'shutdown-long-tool-once';
const SLOW = 'shutdown-slow-text';
const SLOW_TEXT = 'a b c d e f g h i j';

let server: FakeModelServer;
let env: PiEnv;
let h: Harness;
let base: WorkerProcessOptions;

useRuntimeSuite(
  'shutdown',
  {
    scripts: {
      [TOOL_ONCE]: ({ body, index }) =>
        hasToolResult(body)
          ? { text: 'Slept.' }
          : index === 0
            ? { toolCalls: [{ name: 'bash', arguments: { command: 'sleep 1000' } }] }
            : { text: 'Done on retry.' },
      [SLOW]: { text: SLOW_TEXT, chunkDelayMs: 150 },
    },
    cleanup: async () => {
      await killAllWorkerProcesses();
      if (h !== undefined) await reapOrphans(markerScope(internals(h.runtime).keys.prefix));
    },
  },
  (s) => {
    ({ server, env, h } = s);
    base = { redisUrl: s.redis.url, prefix: h.prefix, env, stateDir: h.stateDir };
  },
);

describe('graceful shutdown (SIGTERM) of a worker process', () => {
  it('an attempt longer than the grace is stopped, left interrupted, and retried by another worker', async () => {
    const worker = await startWorkerProcess({ ...base, shutdownGrace: '1s' });
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Sleep',
      options: { provider: 'fake', model: TOOL_ONCE, cwd: env.cwd },
      retryPolicy: { initialDelayMs: 100, jitter: 'none' },
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
    expect(record.workerPid).toBe(worker.pid);
    await until(
      async () => (await findProcessesByMarker(record.marker)).length >= 2,
      10_000,
      'pi and its tool process',
    );

    worker.kill('SIGTERM');
    expect(await worker.exited).toEqual({ code: 0, signal: null });
    expect(worker.output()).toContain('shutting down');

    // Nothing of the attempt is left running, the session is free, and Redis still says the attempt ran.
    expect(await findProcessesByMarker(record.marker)).toEqual([]);
    expect(await agentRecords(sessionId)).toEqual([]);
    const left = await h.runtime.getSession(sessionId);
    expect(left).toMatchObject({ state: 'running', heldBy: null });
    expect(left?.context?.turn?.attempts.map((a) => a.outcome)).toEqual([null]);
    const jobId = await internals(h.runtime).store.activeJobId(sessionId);
    expect(jobId).not.toBeNull();
    expect(await internals(h.runtime).queue.queue.getJob(jobId ?? '')).toBeDefined();

    // Another worker takes it: the attempt is recorded interrupted, the retry completes the turn.
    const other = await h.startWorker();
    const session = await turnEnded(h.runtime, sessionId);
    expect(session.state).toBe('completed');
    expect(session.context?.turn?.attempts.map((a) => [a.outcome, a.category])).toEqual([
      ['interrupted', 'process_crash'],
      ['completed', null],
    ]);
    const messages = await h.runtime.readMessages(sessionId);
    expectWholeLog(messages);
    expect(messages.filter((m) => m.attempt === 1).map((m) => m.type)).toContain('tool.call');
    expect(assistantText(messages.filter((m) => m.attempt === 2))).toBe('Done on retry.');
    await other.close(2000);
  });

  it('an attempt that ends within the grace completes, is not interrupted, and its activation ends', async () => {
    const worker = await startWorkerProcess({ ...base, shutdownGrace: '30s' });
    server.reset();
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Count',
      options: { provider: 'fake', model: SLOW, cwd: env.cwd },
    });
    await until(async () => server.requestsFor(SLOW).length === 1, 30_000, 'the model request');
    expect((await h.runtime.getSession(sessionId))?.heldBy?.startsWith(`${worker.workerId}#`)).toBe(true);

    worker.kill('SIGTERM');
    expect(await worker.exited).toEqual({ code: 0, signal: null });

    const session = await h.runtime.getSession(sessionId);
    expect(session?.state).toBe('completed');
    expect(session?.context?.turn?.attempts.map((a) => a.outcome)).toEqual(['completed']);
    expect(server.requestsFor(SLOW)).toHaveLength(1);
    const messages = await h.runtime.readMessages(sessionId);
    expectWholeLog(messages);
    expect(assistantText(messages)).toBe(SLOW_TEXT);
    expect(messages.at(-1)?.type).toBe('terminal.completed');
    expect(await agentRecords(sessionId)).toEqual([]);
    // Given back as done, not as interrupted: no activation is left to run again for nothing.
    expect(session?.heldBy).toBeNull();
    expect(await internals(h.runtime).store.activeJobId(sessionId)).toBeNull();
  });
});
