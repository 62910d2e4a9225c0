import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import {
  AGENT_MARKER_ENV,
  findProcessesByMarker,
  isAlive,
  killProcessTree,
  processStartTime,
} from '../../src/process/index.ts';
import {
  baseEnv,
  describeInModes,
  livePids,
  outlivesAgent,
  readPids,
  spawnFixture,
  stopAllAgents,
} from '../support/processes.ts';

const plain: ChildProcess[] = [];

/** A `sleep` started outside the process manager, optionally carrying a marker. */
async function startSleep(marker?: string): Promise<number> {
  const env = marker === undefined ? baseEnv() : { ...baseEnv(), [AGENT_MARKER_ENV]: marker };
  const child = spawn('sleep', ['1000'], { env, stdio: 'ignore' });
  plain.push(child);
  await once(child, 'spawn');
  if (child.pid === undefined) throw new Error('sleep did not start');
  return child.pid;
}

afterEach(async () => {
  for (const child of plain.splice(0)) child.kill('SIGKILL');
  await stopAllAgents();
});

describe('process-tree', () => {
  it('finds every process carrying a marker, and nothing for an unknown marker', async () => {
    const marker = randomUUID();
    const pids = [await startSleep(marker), await startSleep(marker)];
    await startSleep(randomUUID());
    const found = await findProcessesByMarker(marker);
    expect(found.map((p) => p.pid).sort()).toEqual([...pids].sort());
    for (const p of found) expect(p.startTime).toBe(await processStartTime(p.pid));
    expect(await findProcessesByMarker(randomUUID())).toEqual([]);
  });

  it('tells a live process from a gone one, and from a recycled pid via its start time', async () => {
    const pid = await startSleep();
    const startTime = await processStartTime(pid);
    expect(startTime).not.toBeNull();
    expect(await isAlive(pid)).toBe(true);
    expect(await isAlive(pid, startTime ?? '')).toBe(true);
    expect(await isAlive(pid, 'some-other-start-time')).toBe(false);
    process.kill(pid, 'SIGKILL');
    await once(plain.at(-1) as ChildProcess, 'exit');
    expect(await isAlive(pid)).toBe(false);
    expect(await processStartTime(pid)).toBeNull();
  });

  it('does not kill a process that only reuses the pid (start time differs, no marker)', async () => {
    const bystander = await startSleep();

    const result = await killProcessTree(bystander, randomUUID(), { startTime: 'not-its-start-time' });
    expect(result.remaining).toEqual([]);
    await killProcessTree(bystander, randomUUID());

    expect(await isAlive(bystander)).toBe(true);
  });

  it('with notBefore, reads no process started earlier: a marked one of those is left alone', async () => {
    const marker = randomUUID();
    const older = await startSleep(marker);
    const startTime = await processStartTime(older);
    if (startTime === null) throw new Error('no start time');
    const later = String(BigInt(startTime) + 1n);

    expect((await killProcessTree(2 ** 22 + 1, marker, { notBefore: later })).remaining).toEqual([]);
    expect(await isAlive(older)).toBe(true);
    await killProcessTree(2 ** 22 + 1, marker, { notBefore: startTime });
    expect(await isAlive(older)).toBe(false);
  });

  it('kills a root given only its pid and marker', async () => {
    const marker = randomUUID();
    const pid = await startSleep(marker);
    expect((await killProcessTree(pid, marker)).remaining).toEqual([]);
    expect(await isAlive(pid)).toBe(false);
  });
});

describeInModes('process-tree: an agent’s tree', () => {
  it('reaps an orphaned tree by marker after its agent died (as at worker start)', async () => {
    const agent = await spawnFixture('pi-like.mjs', ['--exit-after-ms', '0']);
    const pids = await readPids(agent.lines()[Symbol.asyncIterator](), agent);
    await agent.exited;
    expect(await livePids(pids)).toEqual(outlivesAgent(agent) ? pids.slice(1) : []);

    const result = await killProcessTree(agent.pid, agent.marker, { startTime: agent.startTime });

    expect(result.remaining).toEqual([]);
    expect(await livePids(pids)).toEqual([]);
  });

  it('finds the same tree with notBefore, the agent’s start time (as its stop passes it)', async () => {
    const agent = await spawnFixture('pi-like.mjs', ['--exit-after-ms', '0']);
    const pids = await readPids(agent.lines()[Symbol.asyncIterator](), agent);
    await agent.exited;
    expect(await livePids(pids)).toEqual(outlivesAgent(agent) ? pids.slice(1) : []);

    const result = await killProcessTree(agent.pid, agent.marker, {
      startTime: agent.startTime,
      notBefore: agent.startTime,
    });

    expect(result.remaining).toEqual([]);
    expect(await livePids(pids)).toEqual([]);
  });
});
