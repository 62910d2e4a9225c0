import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { internals } from '../../src/runtime/internals.ts';
import { markerScope, reapOrphans } from '../../src/runtime/orphans.ts';
import type { FakeModelServer } from '../support/fake-model-server.ts';
import type { PiEnv } from '../support/pi-env.ts';
import { agentRecords, expectWholeLog, turnEnded, until, useRuntimeSuite, type Harness } from '../support/runtime.ts';
import { runModel } from '../support/workspace-model.ts';
import {
  killAllWorkerProcesses,
  startWorkerProcess,
  type WorkerProcessOptions,
  workspaceHost,
} from '../support/worker-process.ts';

/**
 * `whenBusy: "rollback"` across worker kills (`sessiond worker` processes, each a host with its own workspace root,
 * one store): a worker stopped (SIGSTOP, then kill -9) before it could handle the rollback's cancel leaves it to the
 * next worker, which interrupts the turn and takes it back; a worker killed after the take-back landed (its new
 * turn's tool running) leaves a session that the next worker does not take back again. Taken back once.
 */

const MODEL = 'ws-rollback-crash';

let h: Harness;
let env: PiEnv;
let server: FakeModelServer;
const hosts: WorkerProcessOptions[] = [];
const roots: string[] = [];

describe('whenBusy "rollback" and worker kills', () => {
  useRuntimeSuite(
    'when-busy-rollback-crash',
    {
      scripts: { [MODEL]: runModel() },
      cleanup: async () => {
        await killAllWorkerProcesses();
        if (h !== undefined) await reapOrphans(markerScope(internals(h.runtime).keys.prefix));
      },
    },
    (s) => {
      ({ h, env, server } = s);
      const store = join(s.tempDir('store'), 'store.git');
      hosts.length = 0;
      roots.length = 0;
      for (const name of ['host-a', 'host-b', 'host-c']) {
        const dir = s.tempDir(name);
        roots.push(join(dir, 'workspaces'));
        hosts.push(workspaceHost({ redisUrl: s.redis.url, prefix: h.prefix, env, dir, store }));
      }
    },
  );

  it('killed before the cancel was handled, then after the take-back: the turn is interrupted and taken back once', async () => {
    const [hostA, hostB, hostC] = hosts as [WorkerProcessOptions, WorkerProcessOptions, WorkerProcessOptions];
    const [rootA, rootB, rootC] = roots as [string, string, string];
    const a = await startWorkerProcess(hostA);
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'RUN: echo one > a.txt # crash-one',
      options: { provider: 'fake', model: MODEL },
      retryPolicy: { initialDelayMs: 100, jitter: 'none' },
    });
    expect((await turnEnded(h.runtime, sessionId, 1)).state).toBe('completed');
    await h.runtime.enqueue({ sessionId, prompt: 'RUN: echo two > b.txt; sleep 1000 # crash-two' });
    await until(async () => existsSync(join(rootA, sessionId, 'b.txt')), 60_000, 'turn 2’s tool to write b.txt');

    // Worker A is stopped: it cannot handle the rollback's cancel; then it is killed.
    a.kill('SIGSTOP');
    const { turn } = await h.runtime.enqueue(
      {
        sessionId,
        prompt: 'RUN1: echo three > c.txt; sleep 1000 # crash-three RUN2: echo three > c.txt # crash-three',
        whenBusy: 'rollback',
      },
      { mustExist: true },
    );
    expect(turn).toBe(3);
    a.kill('SIGKILL');
    expect(await a.exited).toEqual({ code: null, signal: 'SIGKILL' });

    // Worker B takes the session over: turn 2 is cancelled, taken back, and turn 3's tool runs on turn 1's files.
    const b = await startWorkerProcess(hostB);
    await until(async () => existsSync(join(rootB, sessionId, 'c.txt')), 60_000, 'turn 3’s tool to write c.txt');
    expect(existsSync(join(rootB, sessionId, 'b.txt'))).toBe(false);
    expect(readFileSync(join(rootB, sessionId, 'a.txt'), 'utf8')).toBe('one\n');
    const undoneOnB = (await h.runtime.readMessages(sessionId)).filter((m) => m.type === 'workspace.undone');
    expect(undoneOnB.map((m) => m.content)).toEqual([{ turn: 2, to: 1, snapshot: expect.any(String), rollback: true }]);

    // Killed after the take-back landed: worker C resumes turn 3 and does not take anything back again.
    b.kill('SIGKILL');
    expect(await b.exited).toEqual({ code: null, signal: 'SIGKILL' });
    await reapOrphans(markerScope(internals(h.runtime).keys.prefix));
    await startWorkerProcess(hostC);
    const third = await turnEnded(h.runtime, sessionId, 3, 90_000);
    expect(third.state).toBe('completed');

    const path = join(rootC, sessionId);
    expect(readFileSync(join(path, 'a.txt'), 'utf8')).toBe('one\n');
    expect(readFileSync(join(path, 'c.txt'), 'utf8')).toBe('three\n');
    expect(existsSync(join(path, 'b.txt'))).toBe(false);
    const log = await h.runtime.readMessages(sessionId);
    expectWholeLog(log);
    // Turn 2's attempt ended with its worker (the takeover says so); the cancel found no attempt to stop: no retry ran.
    expect(
      log.filter((m) => m.turn === 2 && m.type.startsWith('terminal.')).map((m) => [m.attempt, m.type, m.content]),
    ).toEqual([[1, 'terminal.failed', expect.objectContaining({ category: 'process_crash' })]]);
    expect(log.filter((m) => m.type === 'workspace.undone')).toEqual(undoneOnB);
    // Every request of turn 3 carries turn 1's conversation, none turn 2's.
    const asked = server
      .requestsFor(MODEL)
      .map((r) => JSON.stringify(r.body.messages ?? []))
      .filter((json) => json.includes('crash-three'));
    expect(asked.length).toBeGreaterThan(0);
    for (const json of asked) {
      expect(json).toContain('crash-one');
      expect(json).not.toContain('crash-two');
    }
    expect(await agentRecords(sessionId)).toEqual([]);
  }, 300_000);
});
