import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { prepareManagedAgentDir } from '../src/agents/pi/home.ts';
import { piSandboxFiles } from '../src/agents/pi/provider.ts';
import { probeMode, spawnAgent, type SandboxMode } from '../src/process/index.ts';
import { socketRelay, startFakeModelServer } from '../test/support/fake-model-server.ts';
import { createPiEnv, modelsJson, piArgs, piBin } from '../test/support/pi-env.ts';
import { startRedis } from '../test/support/redis.ts';
import { BenchFailure } from './support/benchmark.ts';
import { writeFakeAgents } from './support/fake-agents.ts';
import { Fleet, sessionIds } from './support/fleet.ts';
import { bounded, orNull, tempDir } from './support/harness.ts';
import { median, round } from './support/timing.ts';

/**
 * What the bwrap sandbox costs an attempt (docs/sandbox.md):
 * - startRatio: a real pi attempt, from spawnAgent() to pi's first stdout line, in a bwrap sandbox
 *   (the model reached through a bridge) ÷ without one (median of STARTS alternating runs each);
 * - throughputRatio: sessions/s of the e2e benchmark's set-up (one worker process, concurrency 8, a
 *   Node fake pi) with SESSIOND_SANDBOX=bwrap ÷ with SESSIOND_SANDBOX=none (median of REPS alternating runs);
 * - the memory a sandbox adds per attempt: bubblewrap's and sessiond's init's PSS (and RSS), the agent's own not counted.
 */
export const name = 'sandbox';

const STARTS = Number(process.env.BENCH_SANDBOX_STARTS ?? 10);
const SESSIONS = Number(process.env.BENCH_SANDBOX_SESSIONS ?? 60);
const REPS = 3;
const CONCURRENCY = 8;
const MESSAGES = 20;
const TIME_LIMIT_MS = 6 * 60_000;

export async function run(log: (line: string) => void = console.log): Promise<Record<string, unknown>> {
  return bounded(name, TIME_LIMIT_MS, log, async (cleanup, deadline) => {
    const problem = probeMode('bwrap');
    if (problem !== null) throw new BenchFailure(`no bwrap sandbox on this host: ${problem}`);
    const tmp = tempDir('sessiond-bench-sandbox-', cleanup);

    // 1. Start latency with real pi.
    const server = await startFakeModelServer({ chunkDelayMs: 1 });
    cleanup.add('fake model', () => server.close());
    const pi = createPiEnv({ serverUrl: server.url, root: join(tmp, 'pi') });
    const socket = join(tmp, 'model.sock');
    const relay = await socketRelay(socket, server.port);
    cleanup.add('relay', () => new Promise<void>((resolve) => relay.close(() => resolve())));
    const agentDir = await prepareManagedAgentDir(pi.agentDir, join(tmp, 'state'));
    const startOnce = async (mode: SandboxMode | null): Promise<number> => {
      const t0 = performance.now();
      const result = await spawnAgent({
        command: piBin,
        args: piArgs({ model: 'text', prompt: 'hi' }),
        cwd: pi.cwd,
        env: { ...pi.env, PI_CODING_AGENT_DIR: agentDir },
        ...(mode === null
          ? {}
          : {
              sandbox: { mode, ...(await piSandboxFiles(agentDir, undefined, pi.cwd)) },
              bridges: [{ name: 'model', socket }],
              finalize: (urls) => {
                writeFileSync(
                  join(pi.agentDir, 'models.json'),
                  JSON.stringify(modelsJson(`${urls.model ?? ''}/v1`, ['text'], [])),
                );
                return {};
              },
            }),
      });
      if (!result.ok) throw new BenchFailure(result.error);
      if (mode === null)
        writeFileSync(join(pi.agentDir, 'models.json'), JSON.stringify(modelsJson(server.url, ['text'], [])));
      const lines = result.agent.lines()[Symbol.asyncIterator]();
      const first = await lines.next();
      const ms = performance.now() - t0;
      for (let next = await lines.next(); next.done !== true; next = await lines.next()) {
        // read to the end
      }
      const exit = await result.agent.exited;
      await result.agent.stop();
      if (first.done === true || exit.exitCode !== 0)
        throw new BenchFailure(`pi (${mode ?? 'unsandboxed'}) failed: ${result.agent.stderrTail()}`);
      return ms;
    };
    writeFileSync(join(pi.agentDir, 'models.json'), JSON.stringify(modelsJson(server.url, ['text'], [])));
    await startOnce(null);
    await startOnce('bwrap');
    const plain: number[] = [];
    const boxed: number[] = [];
    for (let i = 0; i < STARTS; i += 1) {
      if (i % 2 === 0) {
        plain.push(await startOnce(null));
        boxed.push(await startOnce('bwrap'));
      } else {
        boxed.push(await startOnce('bwrap'));
        plain.push(await startOnce(null));
      }
    }
    const startRatio = median(boxed) / median(plain);
    log(
      `real pi, spawnAgent() to its first stdout line, median of ${STARTS}: ${median(plain).toFixed(0)} ms unsandboxed, ${median(boxed).toFixed(0)} ms in bwrap: ratio ${startRatio.toFixed(3)}`,
    );

    // 2. Memory per attempt: bubblewrap + sessiond's init, around a sleeping agent.
    const sleeper = await spawnAgent({
      command: 'sleep',
      args: ['30'],
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      sandbox: { mode: 'bwrap' },
    });
    if (!sleeper.ok) throw new BenchFailure(sleeper.error);
    await new Promise((r) => setTimeout(r, 300));
    const bwrapPid = sleeper.agent.pid;
    const initPid = Number(readFileSync(`/proc/${bwrapPid}/task/${bwrapPid}/children`, 'utf8').trim().split(' ')[0]);
    const kb = (pid: number, file: string, field: string): number =>
      Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/${file}`, 'utf8'))?.[1] ?? NaN);
    const pssKb = kb(bwrapPid, 'smaps_rollup', 'Pss') + kb(initPid, 'smaps_rollup', 'Pss');
    const rssKb = kb(bwrapPid, 'status', 'VmRSS') + kb(initPid, 'status', 'VmRSS');
    await sleeper.agent.stop();
    log(
      `memory a bwrap sandbox adds per attempt (bubblewrap + sessiond's init, the agent not counted): PSS ${pssKb} kB, RSS ${rssKb} kB`,
    );

    // 3. Throughput of the e2e set-up, sandboxed ÷ not.
    const redis = await startRedis();
    cleanup.add('redis-server', () => redis.stop());
    const fakes = writeFakeAgents(join(tmp, 'fakes'), MESSAGES);
    const fleets: Record<'bwrap' | 'none', Fleet> = {} as Record<'bwrap' | 'none', Fleet>;
    for (const mode of ['none', 'bwrap'] as const) {
      fleets[mode] = await Fleet.start(
        {
          workers: 1,
          url: redis.url,
          prefix: `bench-sandbox-${mode}-${String(process.pid)}`,
          concurrency: CONCURRENCY,
          piCommand: fakes.nodeTurn,
          piArgs: ['--messages', String(MESSAGES)],
          stateDir: fakes.stateDir,
          agentDir: fakes.agentDir,
          env: { SESSIOND_SANDBOX: mode },
        },
        redis.pid,
        cleanup,
        deadline,
      );
      await fleets[mode].run(sessionIds(CONCURRENCY * 2, `warm-${mode}`), 120_000);
    }
    const perSec: Record<'bwrap' | 'none', number[]> = { bwrap: [], none: [] };
    // CPU time per session (the worker's own, and its agents' with bubblewrap and the init): what a
    // sandbox costs a CPU-bound host, and a figure a shared host's load does not blur as it does wall time.
    const cpuMs: Record<'bwrap' | 'none', { worker: number[]; agents: number[] }> = {
      bwrap: { worker: [], agents: [] },
      none: { worker: [], agents: [] },
    };
    for (let rep = 0; rep < REPS; rep += 1) {
      for (const mode of rep % 2 === 0 ? (['none', 'bwrap'] as const) : (['bwrap', 'none'] as const)) {
        const result = await fleets[mode].run(sessionIds(SESSIONS, `r${rep}-${mode}`), 120_000);
        perSec[mode].push(result.perSec);
        cpuMs[mode].worker.push(result.cpuUs.workers / 1000);
        cpuMs[mode].agents.push(result.cpuUs.agents / 1000);
      }
    }
    for (const fleet of Object.values(fleets)) await fleet.close();
    const throughputRatio = median(perSec.bwrap) / median(perSec.none);
    log(
      `e2e set-up (one worker, concurrency ${CONCURRENCY}, Node fake pi, ${SESSIONS} sessions, median of ${REPS}): ${median(perSec.none).toFixed(1)} sessions/s unsandboxed, ${median(perSec.bwrap).toFixed(1)} in bwrap: ratio ${throughputRatio.toFixed(3)}`,
    );
    const cpu = (mode: 'bwrap' | 'none') => ({
      worker: round(median(cpuMs[mode].worker), 1),
      agents: round(median(cpuMs[mode].agents), 1),
    });
    log(
      `CPU per session (median of ${REPS}): unsandboxed worker ${cpu('none').worker} ms + agents ${cpu('none').agents} ms, in bwrap worker ${cpu('bwrap').worker} ms + agents ${cpu('bwrap').agents} ms`,
    );
    return {
      bench: name,
      startRatio: orNull(round(startRatio, 3)),
      throughputRatio: orNull(round(throughputRatio, 3)),
      startMs: { unsandboxed: orNull(round(median(plain), 1)), bwrap: orNull(round(median(boxed), 1)) },
      sessionsPerSec: {
        unsandboxed: orNull(round(median(perSec.none), 1)),
        bwrap: orNull(round(median(perSec.bwrap), 1)),
      },
      addedMemoryKb: { pss: pssKb, rss: rssKb },
      cpuMsPerSession: { unsandboxed: cpu('none'), bwrap: cpu('bwrap') },
    };
  });
}
