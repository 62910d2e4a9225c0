import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { markerScope, reapOrphans } from '../../src/runtime/orphans.ts';
import { internals } from '../../src/runtime/internals.ts';
import type { PiEnv } from '../support/pi-env.ts';
import { runModel } from '../support/workspace-model.ts';
import type { FakeModelServer } from '../support/fake-model-server.ts';
import { turnEnded, until, useRuntimeSuite, type Harness } from '../support/runtime.ts';
import {
  killAllWorkerProcesses,
  startWorkerProcess,
  type WorkerProcess,
  type WorkerProcessOptions,
  workspaceHost,
} from '../support/worker-process.ts';

/**
 * Two `sessiond worker` processes standing for two hosts: separate state dirs, pi session dirs and
 * workspace roots, sharing only Redis and a bare-repository store. A session's files follow it from
 * host A to host B; a kill -9 of a worker while a tool has appended to a file and still runs leaves
 * the resumed turn (on the other host) with that append once, never twice, and the earlier turns'
 * files in place.
 */

const MODEL = 'ws-hosts';

let h: Harness;
let env: PiEnv;
let server: FakeModelServer;
let hostA: WorkerProcessOptions;
let hostB: WorkerProcessOptions;
let rootA: string;
let rootB: string;

function host(redisUrl: string, dir: string, store: string): WorkerProcessOptions {
  return workspaceHost({ redisUrl, prefix: h.prefix, env, dir, store });
}

async function stop(worker: WorkerProcess): Promise<void> {
  worker.kill('SIGTERM');
  expect(await worker.exited).toEqual({ code: 0, signal: null });
}

describe('workspaces across hosts (two worker processes, one store)', () => {
  useRuntimeSuite(
    'workspaces-hosts',
    {
      scripts: { [MODEL]: runModel('echo x >> f.txt') },
      cleanup: async () => {
        await killAllWorkerProcesses();
        if (h !== undefined) await reapOrphans(markerScope(internals(h.runtime).keys.prefix));
      },
    },
    (s) => {
      ({ h, env, server } = s);
      const store = join(s.tempDir('store'), 'store.git');
      const a = s.tempDir('host-a');
      const b = s.tempDir('host-b');
      hostA = host(s.redis.url, a, store);
      hostB = host(s.redis.url, b, store);
      rootA = join(a, 'workspaces');
      rootB = join(b, 'workspaces');
    },
  );

  it('turn 1 on host A, turn 2 on host B sees and extends it; kill -9 mid-tool: the resumed turn on the other host has the append once', async () => {
    let a = await startWorkerProcess(hostA);
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'RUN: echo one > a.txt',
      options: { provider: 'fake', model: MODEL },
      retryPolicy: { initialDelayMs: 100, jitter: 'none' },
    });
    expect((await turnEnded(h.runtime, sessionId, 1)).state).toBe('completed');
    expect(readFileSync(join(rootA, sessionId, 'a.txt'), 'utf8')).toBe('one\n');
    await stop(a);

    const b = await startWorkerProcess(hostB);
    await h.runtime.enqueue({ sessionId, prompt: 'RUN: cat a.txt > b.txt; echo two >> b.txt' });
    expect((await turnEnded(h.runtime, sessionId, 2)).state).toBe('completed');
    expect(readFileSync(join(rootB, sessionId, 'b.txt'), 'utf8')).toBe('one\ntwo\n');
    await stop(b);

    // Turn 3 on host A (its copy is at turn 1: restored to turn 2's snapshot first); its tool appends, then sleeps.
    a = await startWorkerProcess(hostA);
    const prompt = 'RUN1: echo x >> f.txt; sleep 30 RUN2: echo x >> f.txt';
    await h.runtime.enqueue({ sessionId, prompt });
    await until(
      async () => existsSync(join(rootA, sessionId, 'f.txt')) && readFileSync(join(rootA, sessionId, 'f.txt'), 'utf8'),
      30_000,
      'the tool to append on host A',
    );
    expect(readFileSync(join(rootA, sessionId, 'b.txt'), 'utf8')).toBe('one\ntwo\n');
    a.kill('SIGKILL');
    expect(await a.exited).toEqual({ code: null, signal: 'SIGKILL' });

    const b2 = await startWorkerProcess(hostB);
    const session = await turnEnded(h.runtime, sessionId, 3, 60_000);
    expect(session.state).toBe('completed');
    expect(session.context?.turn?.attempts.map((x) => x.outcome)).toEqual(['interrupted', 'completed']);
    const path = join(rootB, sessionId);
    expect(readFileSync(join(path, 'f.txt'), 'utf8')).toBe('x\n');
    expect(readFileSync(join(path, 'a.txt'), 'utf8')).toBe('one\n');
    expect(readFileSync(join(path, 'b.txt'), 'utf8')).toBe('one\ntwo\n');
    // The resumed attempt's conversation (its request ran the quick variant): turns 1 and 2 recorded, turn 3's prompt once.
    const resumedRequest = server
      .requestsFor(MODEL)
      .map((r) => JSON.stringify(r.body.messages ?? []))
      .find((json) => json.includes('echo x >> f.txt\\"}'));
    expect(resumedRequest).toContain('echo one > a.txt');
    expect((resumedRequest ?? '').split('RUN1: echo x').length - 1).toBe(1);

    // Turn 4 on host B: a first tool completes (recorded with the conversation), the second is cut
    // short by kill -9; host A resumes: the conversation goes on after the first tool's result (its
    // file once, not run again) and the second tool's append is there once.
    await h.runtime.enqueue({ sessionId, prompt: 'RUN: echo y >> g.txt THEN: echo x >> f.txt; sleep 30' });
    await until(
      async () => readFileSync(join(rootB, sessionId, 'f.txt'), 'utf8') === 'x\nx\n',
      30_000,
      'the second tool to append on host B',
    );
    b2.kill('SIGKILL');
    expect(await b2.exited).toEqual({ code: null, signal: 'SIGKILL' });
    const a2 = await startWorkerProcess(hostA);
    const resumed = await turnEnded(h.runtime, sessionId, 4, 60_000);
    expect(resumed.state).toBe('completed');
    expect(resumed.context?.turn?.attempts.map((x) => x.outcome)).toEqual(['interrupted', 'completed']);
    const pathA = join(rootA, sessionId);
    expect(readFileSync(join(pathA, 'g.txt'), 'utf8')).toBe('y\n');
    expect(readFileSync(join(pathA, 'f.txt'), 'utf8')).toBe('x\nx\n');
    expect(readFileSync(join(pathA, 'b.txt'), 'utf8')).toBe('one\ntwo\n');
    // (The killed worker's pi may still run on host B until its tool ends: its requests are not the resumed attempt's.)
    const continued = server
      .requestsFor(MODEL)
      .map((r) => JSON.stringify(r.body.messages ?? []))
      .filter((json) => json.includes('Please carry on'));
    expect(continued.length).toBeGreaterThan(0);
    for (const json of continued) {
      expect(json.split('echo y >> g.txt').length - 1).toBe(2); // the prompt and its tool call, once each
      expect(json).not.toContain('sleep 30\\"'); // the cut-short call is not in the recorded conversation
    }
    await stop(a2);
  }, 240_000);
});
