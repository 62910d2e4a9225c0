import { afterEach, expect, it } from 'vitest';
import { findProcessesByMarker } from '../../src/process/index.ts';
import {
  collect,
  describeInModes,
  livePids,
  markedPids,
  nextLine,
  outlivesAgent,
  readPids,
  spawnFixture,
  stopAllAgents,
} from '../support/processes.ts';

afterEach(stopAllAgents);

describeInModes('AgentProcess.stop', () => {
  it('SIGKILLs an agent that ignores SIGINT and SIGTERM, with its child, leaving nothing with its marker', async () => {
    const agent = await spawnFixture('ignore-signals.mjs');
    const pids = await readPids(agent.lines()[Symbol.asyncIterator](), agent);
    expect(pids).toHaveLength(2);
    expect(await markedPids(agent)).toEqual(expect.arrayContaining(pids));

    await agent.stop();

    expect(await agent.exited).toEqual({ exitCode: null, signal: 'SIGKILL', stopReason: 'requested' });
    expect(await livePids(pids)).toEqual([]);
    expect(await findProcessesByMarker(agent.marker)).toEqual([]);
  });

  it('kills descendants in their own session and process group, even one that dropped the marker', async () => {
    const agent = await spawnFixture('detached-grandchildren.mjs');
    const pids = await readPids(agent.lines()[Symbol.asyncIterator](), agent);
    expect(pids).toHaveLength(3);
    const [, child, grandchild] = pids;
    expect(await markedPids(agent)).toContain(child);
    expect(await markedPids(agent)).not.toContain(grandchild); // its env was scrubbed

    await agent.stop();

    expect((await agent.exited).stopReason).toBe('requested');
    expect(await livePids(pids)).toEqual([]);
    expect(await findProcessesByMarker(agent.marker)).toEqual([]);
  });

  it('kills the tool child a pi-like agent leaves behind when it dies on SIGINT at once', async () => {
    const agent = await spawnFixture('pi-like.mjs');
    const pids = await readPids(agent.lines()[Symbol.asyncIterator](), agent);
    expect(pids).toHaveLength(2);

    await agent.stop();

    expect(await agent.exited).toEqual({ exitCode: 130, signal: null, stopReason: 'requested' });
    expect(await livePids(pids)).toEqual([]);
    expect(await findProcessesByMarker(agent.marker)).toEqual([]);
  });

  it('sweeps survivors when called after the agent already exited by itself', async () => {
    const agent = await spawnFixture('pi-like.mjs', ['--exit-after-ms', '0']);
    const pids = await readPids(agent.lines()[Symbol.asyncIterator](), agent);
    expect(await agent.exited).toEqual({ exitCode: 0, signal: null, stopReason: null });
    const sleeper = pids[1] ?? -1;
    expect(await livePids([sleeper])).toEqual(outlivesAgent(agent) ? [sleeper] : []);

    await agent.stop();

    expect(await livePids(pids)).toEqual([]);
    expect((await agent.exited).stopReason).toBeNull();
  });

  it('shares one run between concurrent calls, keeps the first reason, and is safe to call again after', async () => {
    const agent = await spawnFixture('ignore-signals.mjs');
    const pids = await readPids(agent.lines()[Symbol.asyncIterator](), agent);

    const first = agent.stop();
    const second = agent.stop('idle_timeout');
    expect(second).toBe(first);
    await Promise.all([first, second]);

    expect((await agent.exited).stopReason).toBe('requested');
    expect(await livePids(pids)).toEqual([]);
    await expect(agent.stop()).resolves.toBeUndefined();
  });

  it('resolves without error for an agent that has exited and left nothing', async () => {
    const agent = await spawnFixture('print-lines.mjs', ['1']);
    expect(await collect(agent.lines())).toEqual(['line 1']);
    await agent.exited;
    await expect(agent.stop()).resolves.toBeUndefined();
    expect((await agent.exited).stopReason).toBeNull();
  });

  it('leaves the processes of other agents alone', async () => {
    const [stopped, other] = await Promise.all([spawnFixture('pi-like.mjs'), spawnFixture('pi-like.mjs')]);
    const [stoppedPids, otherPids] = await Promise.all([
      readPids(stopped.lines()[Symbol.asyncIterator](), stopped),
      readPids(other.lines()[Symbol.asyncIterator](), other),
    ]);

    await stopped.stop();

    expect(await livePids(stoppedPids)).toEqual([]);
    expect(await livePids(otherPids)).toEqual(otherPids);
  });

  it('ends the lines of a stopped agent', async () => {
    const agent = await spawnFixture('pi-like.mjs');
    const lines = agent.lines()[Symbol.asyncIterator]();
    await readPids(lines);
    await agent.stop();
    expect((await lines.next()).done).toBe(true);
  });
});

describeInModes('idle timeout', () => {
  it('stops an agent that prints nothing, with stopReason idle_timeout', async () => {
    const agent = await spawnFixture('silent.mjs', [], { idleTimeoutMs: 200 });
    const lines = collect(agent.lines());
    const exit = await agent.exited;
    expect(exit.stopReason).toBe('idle_timeout');
    expect(await lines).toEqual([]);
    expect(await findProcessesByMarker(agent.marker)).toEqual([]);
  });

  it('a held agent (it waits for an approval) is not idle however long it is silent; released, the idle timeout runs again', async () => {
    const agent = await spawnFixture('silent.mjs', [], { idleTimeoutMs: 200 });
    const release = agent.holdIdle();
    const lines = collect(agent.lines());
    let exitedWhileHeld = false;
    void agent.exited.then(() => (exitedWhileHeld = true));
    // Five idle periods of silence while held.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(exitedWhileHeld).toBe(false);
    release();
    release(); // a release works once
    expect((await agent.exited).stopReason).toBe('idle_timeout');
    expect(await lines).toEqual([]);
  });

  it('does not stop an agent that exits by itself in time', async () => {
    const agent = await spawnFixture('print-lines.mjs', ['3'], { idleTimeoutMs: 30_000 });
    expect(await collect(agent.lines())).toHaveLength(3);
    expect((await agent.exited).stopReason).toBeNull();
  });
});

describeInModes('exit grace', () => {
  it('stops an agent that lingers after its final event, with stopReason exit_grace', async () => {
    const agent = await spawnFixture('ignore-signals.mjs');
    const lines = agent.lines()[Symbol.asyncIterator]();
    const pids = await readPids(lines, agent);
    expect(JSON.parse(await nextLine(lines))).toEqual({ type: 'final' });

    // What runAgentAttempt does once the grace after the final event has passed.
    void agent.stop('exit_grace');

    expect(await agent.exited).toEqual({ exitCode: null, signal: 'SIGKILL', stopReason: 'exit_grace' });
    await agent.stop(); // joins the run the grace started
    expect(await livePids(pids)).toEqual([]);
  });
});
