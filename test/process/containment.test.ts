import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  detectContainment,
  findProcessesByMarker,
  killEscapees,
  spawnAgent,
  type AgentProcess,
} from '../../src/process/index.ts';
import { liveSleeps, type Proc } from '../support/ps.ts';
import { collect, describeInModes, outlivesAgent, testSandbox } from '../support/processes.ts';

const started: AgentProcess[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((a) => a.stop()));
});

async function spawnShell(script: string, limits?: { pidsMax?: number }): Promise<AgentProcess> {
  const result = await spawnAgent({
    command: 'bash',
    args: ['-c', script],
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', SESSIOND_SECRET: 'never-seen' },
    ...(limits === undefined ? {} : { limits }),
    ...testSandbox(),
  });
  if (!result.ok) throw new Error(result.error);
  started.push(result.agent);
  return result.agent;
}

const until = async (probe: () => boolean, ms: number): Promise<void> => {
  const deadline = Date.now() + ms;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
};

describe('this host', () => {
  it('contains attempts in cgroups, with a pids ceiling (the tests below rely on it)', () => {
    const info = detectContainment();
    expect(info, info.detail).toMatchObject({ mode: 'cgroup' });
    expect(info.limits).toContain('pids');
  });

  it('killEscapees kills a process sitting in sessiond’s own cgroup (where a tool that left its attempt’s cgroup lands), and nothing else', async () => {
    // sessiond's cgroup: the parent of the attempts' (cgroup.ts), where no process belongs.
    const mount =
      readFileSync('/proc/mounts', 'utf8')
        .split('\n')
        .map((l) => l.split(' '))
        .find((f) => f[2] === 'cgroup2')?.[1] ?? '';
    const own = /^0::(.*)$/m.exec(readFileSync('/proc/self/cgroup', 'utf8'))?.[1] ?? '/';
    const escaped = spawn('sleep', ['3031'], { stdio: 'ignore' });
    const bystander = spawn('sleep', ['3032'], { stdio: 'ignore' });
    // By pid: the host is shared, another run's sleeps of the same length are not this test's.
    const ours = (d: number): Proc[] =>
      liveSleeps([d]).filter((p) => p.pid === (d === 3031 ? escaped.pid : bystander.pid));
    try {
      writeFileSync(join(mount, own, 'sessiond', 'cgroup.procs'), String(escaped.pid));
      await until(() => ours(3031).length + ours(3032).length === 2, 5000);

      expect(killEscapees()).toBe(1);

      await until(() => ours(3031).length === 0, 5000);
      expect(ours(3032)).toHaveLength(1);
    } finally {
      escaped.kill('SIGKILL');
      bystander.kill('SIGKILL');
    }
  });
});

// Every test once unsandboxed and once in bubblewrap; the sleeps' durations differ per mode.
describeInModes('containment of an attempt’s processes', (mode) => {
  const d = (n: number) => n + (mode === 'none' ? 0 : mode === 'bwrap' ? 500 : 700);

  it('the agents of this block run in its sandbox mode', async () => {
    const agent = await spawnShell('echo ok');
    expect(await collect(agent.lines())).toEqual(['ok']);
    expect(agent.sandbox).toBe(mode);
  });

  it('after an agent that exits by itself, stop() kills its background job, a setsid child and an env -i setsid child: none is left', async () => {
    const agent = await spawnShell(
      `sleep ${d(3011)} & setsid sleep ${d(3012)} & env -i setsid sleep ${d(3013)} & echo started`,
    );
    expect(await collect(agent.lines())).toEqual(['started']);
    expect((await agent.exited).exitCode).toBe(0);
    if (outlivesAgent(agent)) {
      await until(() => liveSleeps([d(3011), d(3012), d(3013)]).length === 3, 5000);
      // The env -i child carries no marker: only its cgroup says whose it is.
      expect(liveSleeps([d(3013)]).every((p) => p.args === `sleep ${d(3013)}`)).toBe(true);
    }

    await agent.stop();

    expect(liveSleeps([d(3011), d(3012), d(3013)])).toEqual([]);
    expect(await findProcessesByMarker(agent.marker)).toEqual([]);
  });

  it('an agent never sees a SESSIOND_* variable of its spec, only its marker', async () => {
    const agent = await spawnShell('env');
    const lines = await collect(agent.lines());
    expect(lines.filter((l) => l.startsWith('SESSIOND_')).map((l) => l.split('=')[0])).toEqual([
      'SESSIOND_AGENT_MARKER',
    ]);
  });

  it('a tool that forks without end is held at pids.max, the worker can still fork, and the stop leaves nothing', async () => {
    const agent = await spawnShell(`echo go; while true; do sleep ${d(3021)} & done`, { pidsMax: 40 });
    const lines = agent.lines()[Symbol.asyncIterator]();
    expect((await lines.next()).value).toBe('go');
    await until(() => liveSleeps([d(3021)]).length >= 30, 10_000);
    await new Promise((r) => setTimeout(r, 1000));
    // bash and its sleeps together: never above the ceiling.
    expect(liveSleeps([d(3021)]).length).toBeLessThanOrEqual(40);
    expect(spawnSync('true').status).toBe(0);

    await agent.stop();

    expect(liveSleeps([d(3021)])).toEqual([]);
  });
});
