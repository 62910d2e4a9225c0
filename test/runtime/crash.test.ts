import { describe, expect, it } from 'vitest';
import { findProcessesByMarker, isAlive } from '../../src/process/index.ts';
import { markerScope, reapOrphans } from '../../src/runtime/orphans.ts';
import { DEFAULT_TEXT, type FakeModelServer } from '../support/fake-model-server.ts';
import type { PiEnv } from '../support/pi-env.ts';
import {
  BACKENDS,
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
 * kill -9 of a `sessiond worker` process in the middle of an attempt: a second worker process,
 * started after the kill, reaps the agent process the dead one left on this host, takes the
 * session once the lease runs out, records the attempt as interrupted and retries it.
 */

const MODEL = 'crash-hang-then-text';

let server: FakeModelServer;
let env: PiEnv;
let h: Harness;
let workerOptions: WorkerProcessOptions;

describe.each(BACKENDS)('crash recovery: kill -9 of a worker process mid-attempt, on %s Redis', (backend) => {
  useRuntimeSuite(
    `crash-${backend}`,
    {
      backend,
      // First request: two chunks of text, then silence (pi waits mid-stream); later requests answer.
      scripts: {
        [MODEL]: [
          { text: ['Partial', ' answer', ' never', ' ends'], then: 'hang', afterChunks: 2 },
          { text: DEFAULT_TEXT },
        ],
      },
      cleanup: async () => {
        await killAllWorkerProcesses();
        // Whatever a killed worker left on this host (nothing, if the test passed).
        if (h !== undefined) await reapOrphans(markerScope(internals(h.runtime).keys.prefix));
      },
    },
    (s) => {
      ({ server, env, h } = s);
      workerOptions = {
        redisUrl: s.redis.url,
        prefix: h.prefix,
        env,
        stateDir: h.stateDir,
        leaseTtl: '2s',
        stalledInterval: '1s',
      };
    },
  );

  it('another worker reaps the dead worker’s pi, takes the session, records the attempt interrupted and completes the turn by a retry', async () => {
    const first = await startWorkerProcess(workerOptions);
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Tell me something',
      options: { provider: 'fake', model: MODEL, cwd: env.cwd },
      retryPolicy: { initialDelayMs: 200, jitter: 'none' },
    });

    // Mid-attempt: the model has streamed part of its answer (then hangs), and it is in the log.
    await until(
      async () => assistantText(await h.runtime.readMessages(sessionId)) === 'Partial answer',
      30_000,
      'the partial answer in the log',
    );
    const [record] = await until(async () => {
      const records = await agentRecords(sessionId);
      return records.length === 1 && records[0]?.pid !== null ? records : null;
    });
    if (record?.pid == null || record.startTime === null) throw new Error('no agent process recorded');
    expect(record.workerPid).toBe(first.pid);
    expect(await isAlive(record.pid, record.startTime)).toBe(true);
    const heldBy = (await h.runtime.getSession(sessionId))?.heldBy;
    expect(heldBy?.startsWith(first.workerId)).toBe(true);

    first.kill('SIGKILL');
    expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' });

    // Started after the kill: its start reaps what is left of the dead worker's agent process tree. Since
    // the egress proxy (issue 24) pi reaches its model through its worker's bridge, so it often ends on
    // its own once that worker is gone, before the next one starts: then there is nothing left to reap
    // (orphans.test.ts shows the reaping itself on an agent that outlives its worker).
    const second = await startWorkerProcess(workerOptions);
    expect(await findProcessesByMarker(record.marker)).toEqual([]);
    expect(await isAlive(record.pid, record.startTime)).toBe(false);
    expect((await agentRecords()).map((r) => r.marker)).not.toContain(record.marker);

    const session = await turnEnded(h.runtime, sessionId, 1, 60_000);
    expect(session.state).toBe('completed');
    const attempts = session.context?.turn?.attempts ?? [];
    expect(attempts.map((a) => [a.attempt, a.outcome, a.category])).toEqual([
      [1, 'interrupted', 'process_crash'],
      [2, 'completed', null],
    ]);
    expect(server.requestsFor(MODEL)).toHaveLength(2);
    // The second worker restored a snapshot taken while the attempt ran: interrupted → retry policy.
    expect(session.history.map((t) => `${t.from}→${t.to}`)).toEqual([
      'none→idle',
      'idle→running',
      'interrupted→backoff',
      'backoff→running',
      'running→completed',
    ]);

    const messages = await h.runtime.readMessages(sessionId);
    expectWholeLog(messages);
    // The interrupted attempt's partial output stays, told apart from the retry's.
    const firstAttempt = messages.filter((m) => m.attempt === 1);
    expect(firstAttempt[0]?.type).toBe('session.started');
    expect(assistantText(firstAttempt)).toBe('Partial answer');
    const retry = messages.filter((m) => m.attempt === 2);
    expect(assistantText(retry)).toBe(DEFAULT_TEXT);
    expect(retry.at(-1)?.type).toBe('terminal.completed');
    expect(messages.every((m) => m.turn === 1)).toBe(true);
    // The interrupted attempt ends once in the log too (issue 28), written by the worker that restored it.
    expect(firstAttempt.at(-1)).toMatchObject({
      type: 'terminal.failed',
      content: { category: 'process_crash', text: 'the attempt was interrupted (its worker stopped or crashed)' },
    });
    expect(firstAttempt.filter((m) => m.type.startsWith('terminal.'))).toHaveLength(1);

    // Nothing of this session is left running, and the second worker still stops cleanly.
    expect(await agentRecords(sessionId)).toEqual([]);
    await until(
      async () => (await h.runtime.getSession(sessionId))?.heldBy === null,
      10_000,
      'the lease to be released',
    );
    second.kill('SIGTERM');
    expect(await second.exited).toEqual({ code: 0, signal: null });
  }, 120_000);

  if (backend === 'single') {
    it('a tool call running when its worker is killed is closed by the worker that restores the attempt, before its terminal.failed', async () => {
      const first = await startWorkerProcess(workerOptions);
      const { sessionId } = await h.runtime.enqueue({
        prompt: 'Sleep a long time',
        options: { provider: 'fake', model: 'long-tool-grandchild', cwd: env.cwd },
        retryPolicy: { maxAttempts: 1 },
      });
      const call = await until(
        async () => (await h.runtime.readMessages(sessionId)).find((m) => m.type === 'tool.call'),
        30_000,
        'the long tool to start',
      );
      first.kill('SIGKILL');
      expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' });

      const second = await startWorkerProcess(workerOptions);
      const session = await turnEnded(h.runtime, sessionId, 1, 60_000);
      expect(session.state).toBe('failed');
      expect(session.context?.turn?.attempts.map((a) => [a.outcome, a.category])).toEqual([
        ['interrupted', 'process_crash'],
      ]);
      const messages = await h.runtime.readMessages(sessionId);
      expectWholeLog(messages);
      const { toolCallId } = call.content as { toolCallId: string };
      expect(messages.slice(-2)).toMatchObject([
        {
          type: 'tool.failed',
          attempt: 1,
          content: { toolCallId, name: 'bash', error: 'the attempt was interrupted (its worker stopped or crashed)' },
        },
        { type: 'terminal.failed', attempt: 1, content: { category: 'process_crash' } },
      ]);
      expect(messages.filter((m) => m.type.startsWith('terminal.'))).toHaveLength(1);
      second.kill('SIGTERM');
      expect(await second.exited).toEqual({ code: 0, signal: null });
    }, 120_000);

    it('a turn ended by the takeover (interrupted, no retry left) is told to the embedder of the worker that took it over', async () => {
      const first = await startWorkerProcess(workerOptions);
      const { sessionId } = await h.runtime.enqueue({
        prompt: 'Sleep a long time',
        options: { provider: 'fake', model: 'long-tool-grandchild', cwd: env.cwd },
        retryPolicy: { maxAttempts: 1 },
      });
      await until(
        async () => (await h.runtime.readMessages(sessionId)).find((m) => m.type === 'tool.call'),
        30_000,
        'the long tool to start',
      );
      first.kill('SIGKILL');
      expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' });

      const ended: unknown[] = [];
      await h.startWorker({ events: { turnEnded: (event) => ended.push(event) } });
      expect((await turnEnded(h.runtime, sessionId, 1, 60_000)).state).toBe('failed');
      // Told once the end is stored: at most a moment after the session reads ended.
      await until(async () => ended.length > 0 || null, 10_000, 'the embedder to be told the turn ended');
      expect(ended).toEqual([
        { sessionId, turn: 1, status: 'failed', failureReason: 'attempts_exhausted', cancelReason: null },
      ]);
    }, 120_000);
  }
});
