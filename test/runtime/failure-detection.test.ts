import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { markerScope, reapOrphans } from '../../src/runtime/orphans.ts';
import { internals } from '../../src/runtime/internals.ts';
import { hasToolResult, type ScriptFn } from '../support/fake-model-server.ts';
import type { PiEnv } from '../support/pi-env.ts';
import { expectWholeLog, turnEnded, until, type Harness, useRuntimeSuite } from '../support/runtime.ts';
import { TcpProxy } from '../support/tcp-proxy.ts';
import { killAllWorkerProcesses, startWorkerProcess, type WorkerProcessOptions } from '../support/worker-process.ts';

/**
 * Failure detection without waiting for a long lease (issue 30), with the workers' default timings
 * (SESSIOND_LEASE_TTL and SESSIOND_STALLED_INTERVAL not set): a worker `kill -9`ed mid-attempt has
 * its session running again on another worker within 5 s; a worker cut off from Redis (a TCP proxy
 * between it and Redis, closed) stops its agent before the other worker starts the next attempt —
 * shown by the tools' own timestamps — and, once the proxy is back, writes nothing.
 */

let env: PiEnv;
let h: Harness;
let redisUrl: string;
let toolDir: string;
let workerBase: Omit<WorkerProcessOptions, 'redisUrl'>;

/** Each run of the tool appends the time (ms) to its own file every 20 ms: its lifetime, as the tool saw it. */
const forever = (dir: string): string => `f=${dir}/tool-$$; while :; do date +%s%3N >> $f; sleep 0.02; done`;
const briefly = (dir: string): string => `f=${dir}/tool-$$; for i in $(seq 30); do date +%s%3N >> $f; sleep 0.02; done`;

/** First request: a tool that runs until it is killed; a later attempt's: one that ends; after a tool result: text. */
function toolScript(dir: () => string): ScriptFn {
  return ({ body, index }) => {
    const last = body.messages?.at(-1);
    if (last?.role === 'tool') return { text: 'Done.' };
    const command = index === 0 && !hasToolResult(body) ? forever(dir()) : briefly(dir());
    return { toolCalls: [{ name: 'bash', arguments: { command } }] };
  };
}

/** The tools' lifetimes: [first, last] timestamp of each run, ordered by start. */
function toolLifetimes(dir: string): Array<{ file: string; first: number; last: number }> {
  return readdirSync(dir)
    .filter((f) => f.startsWith('tool-'))
    .map((file) => {
      const times = readFileSync(join(dir, file), 'utf8')
        .split('\n')
        .filter((l) => /^\d+$/.test(l))
        .map(Number);
      return { file, first: Math.min(...times), last: Math.max(...times) };
    })
    .sort((a, b) => a.first - b.first);
}

describe('failure detection with the default lease: kill -9 and a partition', () => {
  useRuntimeSuite(
    'failure-detection',
    {
      scripts: {
        'fd-kill': toolScript(() => join(toolDir, 'kill')),
        'fd-partition': toolScript(() => join(toolDir, 'partition')),
      },
      cleanup: async () => {
        await killAllWorkerProcesses();
        if (h !== undefined) await reapOrphans(markerScope(internals(h.runtime).keys.prefix));
      },
    },
    (s) => {
      ({ env, h } = s);
      redisUrl = s.redis.url;
      toolDir = s.tempDir('fd-tools');
      mkdirSync(join(toolDir, 'kill'));
      mkdirSync(join(toolDir, 'partition'));
      workerBase = { prefix: h.prefix, env, stateDir: h.stateDir, leaseTtl: null, stalledInterval: null };
    },
  );

  const heldBy = async (sessionId: string): Promise<string | null> =>
    (await h.runtime.getSession(sessionId))?.heldBy ?? null;

  it('a worker kill -9ed mid-attempt: its session runs again on another worker within 5 s, nothing lost or duplicated', async () => {
    const first = await startWorkerProcess({ ...workerBase, redisUrl });
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Run the tool',
      options: { provider: 'fake', model: 'fd-kill', cwd: env.cwd },
      retryPolicy: { initialDelayMs: 100, jitter: 'none' },
    });
    await until(() => Promise.resolve(toolLifetimes(join(toolDir, 'kill')).length === 1), 60_000, 'the tool to run');
    expect((await heldBy(sessionId))?.startsWith(first.workerId)).toBe(true);
    const second = await startWorkerProcess({ ...workerBase, redisUrl });

    first.kill('SIGKILL');
    await first.exited;
    // The next attempt runs on the second worker: its holder, attempt 2 under way.
    await until(
      async () => {
        const s = await h.runtime.getSession(sessionId);
        return (
          s?.heldBy?.startsWith(second.workerId) === true && (s.context?.attempt ?? 0) >= 2 && s.state === 'running'
        );
      },
      5000,
      'the session running again on the second worker (5 s after the kill)',
    );

    const session = await turnEnded(h.runtime, sessionId, 1, 60_000);
    expect(session.state).toBe('completed');
    expect(session.context?.turn?.attempts.map((a) => [a.attempt, a.outcome])).toEqual([
      [1, 'interrupted'],
      [2, 'completed'],
    ]);
    const messages = await h.runtime.readMessages(sessionId);
    expectWholeLog(messages);
    for (const attempt of [1, 2])
      expect(messages.filter((m) => m.attempt === attempt && m.type.startsWith('terminal.'))).toHaveLength(1);
    second.kill('SIGTERM');
    expect(await second.exited).toEqual({ code: 0, signal: null });
  }, 120_000);

  it('a worker cut off from Redis stops its agent before the other starts the next attempt, and writes nothing once back', async () => {
    const proxy = new TcpProxy(Number(new URL(redisUrl).port));
    await proxy.open();
    const cut = await startWorkerProcess({ ...workerBase, redisUrl: proxy.url(redisUrl) });
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Run the tool',
      options: { provider: 'fake', model: 'fd-partition', cwd: env.cwd },
      retryPolicy: { initialDelayMs: 0, jitter: 'none' },
    });
    const dir = join(toolDir, 'partition');
    await until(() => Promise.resolve(toolLifetimes(dir).length === 1), 60_000, 'the tool to run');
    expect((await heldBy(sessionId))?.startsWith(cut.workerId)).toBe(true);
    const other = await startWorkerProcess({ ...workerBase, redisUrl });

    await proxy.close();
    const session = await turnEnded(h.runtime, sessionId, 1, 60_000);
    expect(session.state).toBe('completed');
    expect(session.context?.turn?.attempts.map((a) => [a.attempt, a.outcome])).toEqual([
      [1, 'interrupted'],
      [2, 'completed'],
    ]);
    expect(cut.output()).toContain('self-fenced');

    // The two tools' lifetimes, as they recorded them: the cut-off worker's ended before the other's began.
    const lifetimes = toolLifetimes(dir);
    expect(lifetimes).toHaveLength(2);
    const [old, next] = lifetimes;
    if (old === undefined || next === undefined) throw new Error('two tool runs expected');
    expect(old.last).toBeLessThan(next.first);

    // The proxy comes back: the cut-off worker finds the session lost (released stale) and writes nothing.
    const before = await h.runtime.readMessages(sessionId);
    await proxy.open();
    await until(
      () => Promise.resolve(new RegExp(`"sessionId":"${sessionId}"[^\\n]*"outcome":"stale"`).test(cut.output())),
      30_000,
      'the cut-off worker to release the session as stale',
    );
    // Its next heartbeat has landed: whatever it had queued while cut off has been sent by now.
    const workers = internals(h.runtime).redis;
    const seen = Number(
      JSON.parse((await workers.hget(internals(h.runtime).keys.workers, cut.workerId)) ?? '{}').lastSeen ?? 0,
    );
    await until(
      async () =>
        Number(
          JSON.parse((await workers.hget(internals(h.runtime).keys.workers, cut.workerId)) ?? '{}').lastSeen ?? 0,
        ) > seen,
      30_000,
      'a heartbeat of the cut-off worker after the proxy came back',
    );
    const after = await h.runtime.readMessages(sessionId);
    expect(after).toEqual(before);
    expectWholeLog(after);
    expect(after.filter((m) => m.attempt === 1 && m.type.startsWith('terminal.'))).toHaveLength(1);
    for (const w of [cut, other]) {
      w.kill('SIGTERM');
      const exit = await Promise.race([w.exited, new Promise((resolve) => setTimeout(resolve, 30_000, 'no exit'))]);
      expect(
        exit,
        `${w === cut ? 'the reconnected' : 'the other'} worker on SIGTERM:\n${w.output().slice(-3000)}`,
      ).toEqual({
        code: 0,
        signal: null,
      });
    }
    await proxy.close();
  }, 300_000);
});
