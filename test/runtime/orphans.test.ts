import { spawn, type ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { AGENT_MARKER_ENV, findProcessesByMarker, processStartTime } from '../../src/process/index.ts';
import {
  findAgentProcesses,
  freshRuns,
  markerOwner,
  markerScope,
  newMarker,
  parseMarker,
  reapOrphans,
  type MarkerOwner,
} from '../../src/runtime/orphans.ts';
import { uniquePrefix } from '../support/redis.ts';
import { until } from '../support/runtime.ts';

const started: ChildProcess[] = [];

afterEach(() => {
  // The whole group (each agent is detached: its own group), so its background sleeps go too.
  for (const child of started.splice(0)) {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
});

/** An "agent": a shell with its marker, which starts a background sleep (a tool's grandchild) and waits. */
function startAgent(marker: string): ChildProcess {
  const child = spawn('/bin/sh', ['-c', 'sleep 300 & sleep 300; wait'], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', [AGENT_MARKER_ENV]: marker },
    detached: true,
    stdio: 'ignore',
  });
  child.on('error', () => undefined);
  started.push(child);
  return child;
}

/** A worker identity whose process has ended: its pid and start time name nobody alive. */
async function deadOwner(): Promise<MarkerOwner> {
  const child = spawn('sleep', ['30'], { stdio: 'ignore' });
  const pid = child.pid ?? 0;
  const startTime = await until(() => processStartTime(pid), 5_000, 'the short-lived process to start');
  const exited = new Promise((resolve) => child.on('exit', resolve));
  child.kill('SIGKILL');
  await exited;
  return { pid, startTime };
}

describe('agent markers: who started an agent, found in /proc (no registry in Redis)', () => {
  it('a marker names the worker (pid, start time) and the session, even a session id with dots', () => {
    const scope = markerScope('sessiond');
    const marker = newMarker({ pid: 4242, startTime: '987654' }, scope, 'chat.2026-11-30_a');
    expect(parseMarker(marker)).toEqual({
      scope,
      workerPid: 4242,
      workerStartTime: '987654',
      sessionId: 'chat.2026-11-30_a',
    });
    expect(markerScope('another-deployment')).not.toBe(scope);
    expect(parseMarker('sessiond-0b5c7a1e-8a57-4b36-9c1e-2f4d7e3c9a10')).toBeNull();
    expect(parseMarker('something else')).toBeNull();
  });

  it('reapOrphans kills the whole tree of an agent whose worker died, and leaves alone a live worker’s agent and another deployment’s orphan', async () => {
    const scope = markerScope(uniquePrefix('orphans'));
    const dead = await deadOwner();
    const orphanMarker = newMarker(dead, scope, 'orphaned-session');
    const liveMarker = newMarker(await markerOwner(), scope, 'live-session');
    const otherMarker = newMarker(dead, markerScope(uniquePrefix('other-deployment')), 'orphaned-session');
    for (const marker of [orphanMarker, liveMarker, otherMarker]) startAgent(marker);
    // Each: the shell and its two sleeps.
    const counts = async (): Promise<number[]> =>
      Promise.all([orphanMarker, liveMarker, otherMarker].map(async (m) => (await findProcessesByMarker(m)).length));
    await until(async () => (await counts()).every((n) => n === 3), 10_000, 'the three agents and their tools');
    const agents = await findAgentProcesses();
    expect(agents.find((a) => a.marker === orphanMarker)).toMatchObject({
      sessionId: 'orphaned-session',
      processes: expect.any(Array),
    });
    expect(agents.find((a) => a.marker === liveMarker)?.workerPid).toBe(process.pid);

    expect(await reapOrphans(scope)).toEqual({ reaped: 1, killed: 3 });
    expect(await counts()).toEqual([0, 3, 3]);
  });
});

describe('freshRuns: the reap before a takeover, shared by takeovers that come together', () => {
  /** A task whose runs the test ends one by one: `starts` counts them, `end(i)` resolves run i with i. */
  function controlled(): { task: () => Promise<number>; starts: () => number; end: (i: number) => void } {
    const ends: Array<(v: number) => void> = [];
    return {
      task: () => new Promise<number>((resolve) => ends.push(resolve)),
      starts: () => ends.length,
      end: (i) => ends[i]?.(i),
    };
  }

  it('a caller never gets a run that started before its call; a burst of callers shares one more run', async () => {
    const c = controlled();
    const reap = freshRuns(c.task);
    const first = reap();
    expect(c.starts()).toBe(1);
    // These come while run 0 is under way: it may have looked too early for them, so they wait for run 1.
    const later = [reap(), reap(), reap()];
    expect(c.starts()).toBe(1);
    c.end(0);
    expect(await first).toBe(0);
    await Promise.resolve();
    expect(c.starts()).toBe(2);
    // One that comes while run 1 is under way gets run 2, not run 1.
    const last = reap();
    c.end(1);
    expect(await Promise.all(later)).toEqual([1, 1, 1]);
    await Promise.resolve();
    expect(c.starts()).toBe(3);
    c.end(2);
    expect(await last).toBe(2);
    // None under way: a new call starts its own run at once.
    const alone = reap();
    expect(c.starts()).toBe(4);
    c.end(3);
    expect(await alone).toBe(3);
  });

  it("a failed run fails its own callers only; the next callers' run starts after it", async () => {
    let n = 0;
    const ends: Array<{ resolve: (v: number) => void; reject: (e: Error) => void }> = [];
    const reap = freshRuns(
      () =>
        new Promise<number>((resolve, reject) => {
          ends.push({ resolve, reject });
          n += 1;
        }),
    );
    const first = reap();
    const second = reap();
    ends[0]?.reject(new Error('scan failed'));
    await expect(first).rejects.toThrow('scan failed');
    await Promise.resolve();
    expect(n).toBe(2);
    ends[1]?.resolve(7);
    expect(await second).toBe(7);
  });
});
