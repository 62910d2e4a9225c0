import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { startRedis } from '../test/support/redis.ts';
import { BenchFailure } from './support/benchmark.ts';
import { writeFakeAgents } from './support/fake-agents.ts';
import { Fleet, PROMPT, sessionIds, type FleetRun } from './support/fleet.ts';
import {
  bounded,
  orNull,
  pool,
  procCpuMs,
  withTimeout,
  tempDir,
  type Cleanup,
  type Deadline,
} from './support/harness.ts';
import { median, round } from './support/timing.ts';

/**
 * End to end, with a fake agent PROCESS: one real worker process
 * (`node bin/sessiond.mjs worker`, concurrency CONCURRENCY, configured by
 * environment variables) whose pi `command` is a fake pi
 * (support/fake-pi.mjs: a Node process that takes the prompt, prints one
 * whole pi turn as JSON lines and exits; sessiond runs it in `--mode rpc`), so sessiond's process manager
 * (spawn, own process group, stdout lines, exit), the pi mapper, the session
 * machine, the lease and every message persisted in Redis all run; sessions
 * are enqueued from this process (Runtime.enqueue, PRODUCER_IN_FLIGHT calls in
 * flight) and timed from the first enqueue to the last "session released".
 *
 * Baseline: spawning the same executable directly from this process
 * (child_process.spawn, `--mode json --print`: the prompt on stdin to its end, stdout read to its end,
 * exit awaited), SESSIONS times, CONCURRENCY at a time. On this 2-core machine
 * both sides are bound by the OS starting Node processes, which is the point:
 * ratio = sessionsPerSec / baselineSpawnsPerSec shows what is left of the
 * spawn rate once sessiond runs around each process (medians of REPETITIONS
 * alternating runs after a warm-up). Cross-check, less disturbed by what else
 * runs on the machine: cpuRatio = all CPU per direct spawn (this process + the
 * agent) ÷ all CPU per session (worker + agent + redis-server + producer).
 *
 * Informational: the same with the cheapest agent process there is (a /bin/sh
 * script, builtins only), where sessiond's own cost is no longer hidden by
 * the agent's start-up.
 */
export const name = 'e2e';

const CONCURRENCY = 8;
const SESSIONS = Number(process.env.BENCH_E2E_SESSIONS ?? 120);
const CHEAP_SESSIONS = Number(process.env.BENCH_E2E_CHEAP_SESSIONS ?? 500);
const WARMUP_FRACTION = 0.25;
const REPETITIONS = 5;
const MESSAGES = 20;
/** Everything, setup and teardown included, must end within this. */
const TIME_LIMIT_MS = 4 * 60_000;

interface Side {
  perSec: number;
  wallMs: number;
  /** CPU per item in µs: the orchestrating process (worker, or this process for the baseline) and the agent processes… */
  hostCpuUs: number;
  agentCpuUs: number;
  /** …and everything: for sessions also redis-server and the producer (this process). */
  totalCpuUs: number;
}

interface AgentResult {
  agent: string;
  sessions: Side[];
  spawns: Side[];
}

/** Spawns `command` once as pi would be (prompt on stdin, stdout read to its end) and checks it printed `lines` lines and exited 0. */
function spawnOnce(command: string, args: readonly string[], lines: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let newlines = 0;
    child.stdout.on('data', (chunk: Buffer) => {
      for (let i = chunk.indexOf(10); i >= 0; i = chunk.indexOf(10, i + 1)) newlines += 1;
    });
    child.stderr.resume();
    child.stdin.on('error', () => undefined);
    child.stdin.end(PROMPT);
    child.once('error', reject);
    child.once('close', (code, signal) => {
      if (code !== 0) reject(new BenchFailure(`${command} exited with ${code ?? signal}`));
      else if (newlines !== lines) reject(new BenchFailure(`${command} printed ${newlines} lines, expected ${lines}`));
      else resolve();
    });
  });
}

async function spawnRun(
  command: string,
  args: readonly string[],
  n: number,
  lines: number,
  deadline: Deadline,
): Promise<Side> {
  const before = procCpuMs('self');
  const start = performance.now();
  await withTimeout(
    pool(
      Array.from({ length: n }, (_, i) => i),
      CONCURRENCY,
      () => spawnOnce(command, args, lines),
    ),
    deadline.cap(120_000),
    `${n} direct spawns of ${command}`,
  );
  const wallMs = performance.now() - start;
  const after = procCpuMs('self');
  const hostCpuUs = ((after.ownMs - before.ownMs) * 1000) / n;
  const agentCpuUs = ((after.childrenMs - before.childrenMs) * 1000) / n;
  return { perSec: n / (wallMs / 1000), wallMs, hostCpuUs, agentCpuUs, totalCpuUs: hostCpuUs + agentCpuUs };
}

function sessionSide(run: FleetRun): Side {
  const c = run.cpuUs;
  return {
    perSec: run.perSec,
    wallMs: run.wallMs,
    hostCpuUs: c.workers,
    agentCpuUs: c.agents,
    totalCpuUs: c.workers + c.agents + c.redis + c.producer,
  };
}

async function measureAgent(
  ctx: {
    url: string;
    redisPid: number;
    runId: string;
    cleanup: Cleanup;
    deadline: Deadline;
    log: (line: string) => void;
  },
  agent: string,
  command: string,
  stateDir: string,
  agentDir: string,
  n: number,
): Promise<AgentResult> {
  const piArgs = ['--messages', String(MESSAGES)];
  // pi's json mode (the prompt on stdin to its end; sessiond runs --mode rpc, src/agents/pi/options.ts: piArgs) and the extra arguments.
  const directArgs = ['--mode', 'json', '--print', ...piArgs];
  // session, agent_start, turn_start, the user's message_start/end, the assistant's message_start; the deltas; message_end, turn_end, agent_end.
  const lines = 6 + (MESSAGES - 2) + 3;
  const fleet = await Fleet.start(
    {
      workers: 1,
      url: ctx.url,
      prefix: `bench-${ctx.runId}-e2e-${agent}`,
      concurrency: CONCURRENCY,
      piCommand: command,
      piArgs,
      stateDir,
      agentDir,
    },
    ctx.redisPid,
    ctx.cleanup,
    ctx.deadline,
  );
  const timeout = Math.max(60_000, n * 200);
  const warm = Math.max(CONCURRENCY, Math.round(n * WARMUP_FRACTION));
  const warmIds = sessionIds(warm, 'warm');
  await fleet.run(warmIds, timeout);
  await spawnRun(command, directArgs, warm, lines, ctx.deadline);
  const result: AgentResult = { agent, sessions: [], spawns: [] };
  const all: string[] = [...warmIds];
  for (let rep = 0; rep < REPETITIONS; rep += 1) {
    const ids = sessionIds(n, `r${rep}`);
    all.push(...ids);
    // Alternate which side goes first.
    if (rep % 2 === 0) {
      result.spawns.push(await spawnRun(command, directArgs, n, lines, ctx.deadline));
      result.sessions.push(sessionSide(await fleet.run(ids, timeout)));
    } else {
      result.sessions.push(sessionSide(await fleet.run(ids, timeout)));
      result.spawns.push(await spawnRun(command, directArgs, n, lines, ctx.deadline));
    }
  }
  await fleet.verify(all, MESSAGES);
  await fleet.close();
  return result;
}

export async function run(log: (line: string) => void = console.log): Promise<Record<string, unknown>> {
  return bounded(name, TIME_LIMIT_MS, log, async (cleanup, deadline) => {
    const redis = await startRedis();
    cleanup.add('redis-server', () => redis.stop());
    const tmp = tempDir('sessiond-bench-e2e-', cleanup);
    const fakes = writeFakeAgents(tmp, MESSAGES);
    const ctx = { url: redis.url, redisPid: redis.pid, runId: randomBytes(3).toString('hex'), cleanup, deadline, log };
    log(
      `one worker process (node bin/sessiond.mjs worker, concurrency ${CONCURRENCY}) on one redis-server (AOF off), sessions enqueued from this process; ` +
        `vs the same fake pi spawned directly from this process, ${CONCURRENCY} at a time; each turn: ${MESSAGES} messages; median of ${REPETITIONS} alternating runs after a warm-up`,
    );
    const results: AgentResult[] = [];
    for (const [agent, command, n] of [
      ['node', fakes.nodeTurn, SESSIONS],
      ['sh', fakes.shTurn, CHEAP_SESSIONS],
    ] as const) {
      const r = await measureAgent(ctx, agent, command, fakes.stateDir, fakes.agentDir, n);
      results.push(r);
      const fmt = (sides: Side[]): string => sides.map((s) => `${s.perSec.toFixed(1)}/s`).join(', ');
      const cpu = (sides: Side[]): string =>
        `${(median(sides.map((s) => s.hostCpuUs)) / 1000).toFixed(2)} ms orchestrating + ${(median(sides.map((s) => s.agentCpuUs)) / 1000).toFixed(2)} ms in the agent`;
      const sessions = median(r.sessions.map((s) => s.perSec));
      const spawns = median(r.spawns.map((s) => s.perSec));
      log(
        `  ${agent === 'node' ? 'fake pi = a Node process (support/fake-pi.mjs)' : '(informational) fake pi = a /bin/sh script, builtins only'}: ${n} sessions per run`,
      );
      log(`    direct spawns ${fmt(r.spawns)}; sessions ${fmt(r.sessions)}`);
      log(
        `    median ${sessions.toFixed(1)} sessions/s vs ${spawns.toFixed(1)} spawns/s: ratio ${(sessions / spawns).toFixed(3)}`,
      );
      log(`    CPU per item (median): session ${cpu(r.sessions)}; direct spawn ${cpu(r.spawns)}`);
      const cpuRatio = median(r.spawns.map((s) => s.totalCpuUs)) / median(r.sessions.map((s) => s.totalCpuUs));
      log(
        `    cross-check on CPU, less disturbed by the machine's other load: all CPU per direct spawn ÷ all CPU per session (worker, agent, redis-server, producer) = ${cpuRatio.toFixed(3)}`,
      );
    }
    log(
      `  checked: every session completed, ${MESSAGES} messages each (XLEN), 3 per agent read back in full (seq 1..${MESSAGES}, one attempt); every direct spawn exited 0 with all its lines`,
    );
    const [node, sh] = results;
    if (node === undefined || sh === undefined) throw new BenchFailure('missing results');
    const summary = (r: AgentResult) => {
      const sessionsPerSec = median(r.sessions.map((s) => s.perSec));
      const baselineSpawnsPerSec = median(r.spawns.map((s) => s.perSec));
      return {
        sessionsPerSec: orNull(round(sessionsPerSec, 1)),
        baselineSpawnsPerSec: orNull(round(baselineSpawnsPerSec, 1)),
        ratio: orNull(round(sessionsPerSec / baselineSpawnsPerSec, 3)),
        cpuRatio: orNull(
          round(median(r.spawns.map((s) => s.totalCpuUs)) / median(r.sessions.map((s) => s.totalCpuUs)), 3),
        ),
      };
    };
    return {
      bench: name,
      ...summary(node),
      concurrency: CONCURRENCY,
      cheapAgent: summary(sh),
    };
  });
}
