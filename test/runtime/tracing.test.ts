import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { markerScope, reapOrphans } from '../../src/runtime/orphans.ts';
import { attemptSpanId, parseTurnTrace } from '../../src/runtime/tracing/trace-context.ts';
import { DEFAULT_TEXT, type FakeModelServer } from '../support/fake-model-server.ts';
import { httpPi } from '../support/limits.ts';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../support/otlp-receiver.ts';
import type { PiEnv } from '../support/pi-env.ts';
import { assistantText, turnEnded, until, type Harness, useRuntimeSuite } from '../support/runtime.ts';
import { killAllWorkerProcesses, startWorkerProcess, type WorkerProcessOptions } from '../support/worker-process.ts';
import { internals } from '../../src/runtime/internals.ts';

/**
 * OpenTelemetry traces exported over OTLP/HTTP to an in-process receiver on 127.0.0.1: one trace
 * per turn, a span per attempt under the turn's span (a 500 then a success: two), the agent's
 * process given the attempt's TRACEPARENT, and a turn that moves to another worker after a
 * kill -9 stays one trace.
 */

const TRACE_PI = fileURLToPath(new URL('../fixtures/agents/trace-pi.sh', import.meta.url));
const FLAKY = 'trace-500-then-text';
const HANG = 'trace-hang-then-text';

let receiver: OtlpReceiver;
let server: FakeModelServer;
let env: PiEnv;
let h: Harness;
let workerOptions: WorkerProcessOptions;
let scratch: string;

const saved = { endpoint: process.env.OTEL_EXPORTER_OTLP_ENDPOINT, delay: process.env.OTEL_BSP_SCHEDULE_DELAY };

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  // Read by the in-process worker's tracing when it starts (and by the exporter).
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = receiver.url;
  process.env.OTEL_BSP_SCHEDULE_DELAY = '100';
  scratch = mkdtempSync(join(tmpdir(), 'sessiond-trace-'));
});

afterAll(async () => {
  if (saved.endpoint === undefined) delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
  else process.env.OTEL_EXPORTER_OTLP_ENDPOINT = saved.endpoint;
  if (saved.delay === undefined) delete process.env.OTEL_BSP_SCHEDULE_DELAY;
  else process.env.OTEL_BSP_SCHEDULE_DELAY = saved.delay;
  await receiver.close();
  rmSync(scratch, { recursive: true, force: true });
});

function ofSession(sessionId: string): ReceivedSpan[] {
  return receiver.spans().filter((s) => s.attributes['sessiond.session_id'] === sessionId);
}

describe('traces', () => {
  useRuntimeSuite(
    'tracing',
    {
      scripts: {
        [FLAKY]: [{ status: 500 }, { text: DEFAULT_TEXT }],
        // First request: part of an answer, then silence (the worker is killed meanwhile); later ones answer.
        [HANG]: [
          { text: ['Partial', ' answer', ' never', ' ends'], then: 'hang', afterChunks: 2 },
          { text: DEFAULT_TEXT },
        ],
      },
      cleanup: async () => {
        await killAllWorkerProcesses();
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
        extraEnv: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '100' },
      };
    },
  );

  it('exports one trace per turn with a span per attempt, and the agent gets the attempt’s TRACEPARENT', async () => {
    const traceLog = join(scratch, 'traceparents.log');
    writeFileSync(traceLog, '');
    const pi = httpPi(env, h, server.url);
    const worker = await h.startWorker({
      agentOptions: {
        pi: { ...pi, command: TRACE_PI, env: { ...(pi.env as Record<string, string>), TRACE_LOG: traceLog } },
      },
    });
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Trace me',
      options: { provider: 'fake', model: FLAKY, cwd: env.cwd },
      retryPolicy: { initialDelayMs: 200, jitter: 'none' },
    });
    expect((await turnEnded(h.runtime, sessionId, 1)).state).toBe('completed');
    await h.runtime.enqueue({ sessionId, prompt: 'Trace me again', options: {} });
    expect((await turnEnded(h.runtime, sessionId, 2)).state).toBe('completed');
    await worker.close();

    const spans = await until(
      async () => (ofSession(sessionId).length >= 5 ? ofSession(sessionId) : null),
      30_000,
      'five spans',
    );
    expect(receiver.refused()).toEqual([]);
    expect(spans).toHaveLength(5);
    const turns = spans
      .filter((s) => s.name === 'sessiond.turn')
      .sort((a, b) => Number(a.attributes['sessiond.turn']) - Number(b.attributes['sessiond.turn']));
    expect(
      turns.map((t) => [
        t.attributes['sessiond.turn'],
        t.attributes['sessiond.outcome'],
        t.attributes['sessiond.attempts'],
        t.parentSpanId,
      ]),
    ).toEqual([
      [1, 'completed', 2, ''],
      [2, 'completed', 1, ''],
    ]);
    // One trace per turn.
    const [t1, t2] = turns;
    if (t1 === undefined || t2 === undefined) throw new Error('turn spans missing');
    expect(t1.traceId).not.toBe(t2.traceId);
    const attemptsOf = (turn: ReceivedSpan) =>
      spans
        .filter((s) => s.name === 'sessiond.attempt' && s.traceId === turn.traceId)
        .sort((a, b) => Number(a.attributes['sessiond.attempt']) - Number(b.attributes['sessiond.attempt']));
    const first = attemptsOf(t1);
    expect(
      first.map((a) => [
        a.parentSpanId,
        a.attributes['sessiond.outcome'],
        a.attributes['sessiond.category'] ?? null,
        a.attributes['sessiond.retry_delay_ms'] ?? null,
      ]),
    ).toEqual([
      [t1.spanId, 'failed', 'server_error', 200],
      [t1.spanId, 'completed', null, null],
    ]);
    expect(first[0]?.attributes).toMatchObject({
      'sessiond.agent': 'pi',
      'sessiond.model': FLAKY,
      'sessiond.worker': worker.id,
    });
    expect(first[0]?.status.code).toBe(2);
    // The retry follows from the failed attempt; the agent reported its tokens on the answer's span.
    expect(first[1]?.links).toEqual([{ traceId: t1.traceId, spanId: first[0]?.spanId }]);
    expect(first[1]?.attributes).toMatchObject({ 'gen_ai.usage.input_tokens': 1, 'gen_ai.usage.output_tokens': 1 });
    expect(attemptsOf(t2).map((a) => a.parentSpanId)).toEqual([t2.spanId]);
    // Spans cover what the machine recorded: each attempt within its turn.
    for (const a of first) {
      expect(a.startMs).toBeGreaterThanOrEqual(t1.startMs);
      expect(a.endMs).toBeLessThanOrEqual(t1.endMs);
    }

    // Each attempt's process got its own span as the parent of whatever it traces.
    const seen = readFileSync(traceLog, 'utf8').trim().split('\n');
    const expected = [...first, ...attemptsOf(t2)].map((a) => `00-${a.traceId}-${a.spanId}-01 none`);
    expect(seen).toEqual(expected);
  });

  it('a turn that moves to another worker after a kill -9 stays one trace, its interrupted attempt traced by the worker that took over', async () => {
    const firstWorker = await startWorkerProcess(workerOptions);
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Survive a crash',
      options: { provider: 'fake', model: HANG, cwd: env.cwd },
      retryPolicy: { initialDelayMs: 200, jitter: 'none' },
    });
    await until(
      async () => assistantText(await h.runtime.readMessages(sessionId)) === 'Partial answer',
      60_000,
      'the partial answer in the log',
    );
    // Stored with the turn before its first attempt started.
    const stored = parseTurnTrace((await internals(h.runtime).store.meta(sessionId))?.trace, 1);
    if (stored === null) throw new Error('no trace context stored with the turn');
    firstWorker.kill('SIGKILL');
    await firstWorker.exited;

    const second = await startWorkerProcess(workerOptions);
    const done = await turnEnded(h.runtime, sessionId, 1, 60_000);
    expect(done.context?.turn?.attempts.map((a) => [a.outcome, a.category])).toEqual([
      ['interrupted', 'process_crash'],
      ['completed', null],
    ]);
    const spans = await until(
      async () => (ofSession(sessionId).length >= 3 ? ofSession(sessionId) : null),
      30_000,
      'three spans',
    );
    second.kill('SIGTERM');
    await second.exited;

    expect(spans).toHaveLength(3);
    expect(new Set(spans.map((s) => s.traceId))).toEqual(new Set([stored.traceId]));
    const turn = spans.find((s) => s.name === 'sessiond.turn');
    expect(turn?.spanId).toBe(stored.spanId);
    expect(turn?.attributes).toMatchObject({ 'sessiond.outcome': 'completed', 'sessiond.attempts': 2 });
    const attempts = spans
      .filter((s) => s.name === 'sessiond.attempt')
      .sort((a, b) => Number(a.attributes['sessiond.attempt']) - Number(b.attributes['sessiond.attempt']));
    expect(
      attempts.map((a) => [
        a.spanId,
        a.parentSpanId,
        a.attributes['sessiond.outcome'],
        a.attributes['sessiond.category'] ?? null,
        a.attributes['sessiond.worker'],
      ]),
    ).toEqual([
      [attemptSpanId(stored, 1), stored.spanId, 'interrupted', 'process_crash', second.workerId],
      [attemptSpanId(stored, 2), stored.spanId, 'completed', null, second.workerId],
    ]);
    expect(server.requestsFor(HANG)).toHaveLength(2);
  });
});
