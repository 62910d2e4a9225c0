import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { basename } from 'node:path';
import { pi } from '../src/agents/pi/definition.ts';
import { registerAgent } from '../src/agents/registry.ts';
import { findAgentProcesses } from '../src/runtime/orphans.ts';
import { internals } from '../src/runtime/internals.ts';
import { createKeys } from '../src/runtime/keys.ts';
import { Runtime } from '../src/runtime/runtime.ts';
import type { SessionRecord } from '../src/runtime/caller/types.ts';
import { startRedis } from '../test/support/redis.ts';
import { BenchFailure } from './support/benchmark.ts';
import { writeFakeAgents } from './support/fake-agents.ts';
import {
  bounded,
  percentile,
  pool,
  processesMentioning,
  sleep,
  tempDir,
  withTimeout,
  type Cleanup,
  type Deadline,
} from './support/harness.ts';
import { benchWorker, connector } from './support/worker.ts';

/**
 * Steering a running turn (`npm run bench -- steer`, issue 29): `enqueue({ whenBusy: "steer" })` called →
 * the agent has the text, p50/p99, on both paths, against the cancel latency of the same runs. One
 * in-process SessionWorker on a real redis-server; every sample is one session whose turn is at a tool call
 * when the steer comes:
 *
 * - native: support/fake-pi.mjs `--steer` as pi (rpc mode, a real child process): its tool runs until a
 *   `steer` command comes, which it takes at once (the tool ends then) and echoes as a user message.
 *   "Has it": the fake's clock when it read the command (same host), which it reports in the tool's result.
 * - fallback: the same fake pi run as an agent without a native channel (pi's definition without it): its
 *   tool ends as soon as the steer was accepted (the bench sends it SIGUSR1), so the runtime stops its process
 *   at that tool boundary and runs a new one, resuming, with the steer's text (as for Claude Code or Codex).
 *   "Has it": the new process's clock when it read that prompt, which it reports in its tool call.
 *
 * Then `cancel()` → the turn's `cancelled` transition (recorded by the worker), for the same sessions.
 * Each sample is checked: the steer was accepted into turn 1, recorded `prompt.steered` once with the
 * path's `via`, and the turn ended cancelled with no new turn; no fake pi is left at the end. Figures
 * are wall time on whatever else the host runs: the load average is printed with them.
 */

export const name = 'steer';

/** Samples per path (native, fallback) unless BENCH_STEER_SAMPLES says; the cancel figure is over both. */
const SAMPLES = 40;
/** Sessions in flight at once (the worker's concurrency too). */
const CONCURRENCY = 4;
const TIME_LIMIT_MS = 6 * 60_000;

/**
 * pi's definition without its native channel: the fallback's agent. The same fake pi process, stopped at a
 * tool boundary and run again (resuming) with the steer's text, as sessiond does for Claude Code or Codex.
 */
const { steering: _native, ...withoutChannel } = pi;
const FALLBACK_AGENT = 'bench-pi-fallback';

/** The fake pi process (not bwrap or a shell around it) of the session's running attempt, or null. */
async function fakePiOf(sessionId: string): Promise<number | null> {
  for (const group of await findAgentProcesses()) {
    if (group.sessionId !== sessionId) continue;
    for (const { pid } of group.processes) {
      let argv: string[];
      try {
        argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      } catch {
        continue; // gone since it was found: not the running one
      }
      if (basename(argv[0] ?? '') === 'node' && argv[1]?.endsWith('fake-pi.mjs') === true) return pid;
    }
  }
  return null;
}

interface Sample {
  path: 'native' | 'fallback';
  /** enqueue() called → the agent has the steer. */
  steerMs: number;
  /** cancel() called → the `cancelled` transition. */
  cancelMs: number;
}

export async function run(log: (line: string) => void = console.log): Promise<Record<string, unknown>> {
  return bounded('steer', TIME_LIMIT_MS, log, (cleanup, deadline) => measure(log, cleanup, deadline));
}

async function measure(log: (line: string) => void, cleanup: Cleanup, deadline: Deadline) {
  const samplesPerPath = Number(process.env.BENCH_STEER_SAMPLES ?? SAMPLES);
  if (!Number.isInteger(samplesPerPath) || samplesPerPath < 1)
    throw new BenchFailure(`BENCH_STEER_SAMPLES must be a whole number ≥ 1 (got "${process.env.BENCH_STEER_SAMPLES}")`);
  const redis = await startRedis();
  cleanup.add('redis-server', () => redis.stop());
  const fakes = writeFakeAgents(tempDir('sessiond-bench-steer-', cleanup), 20);
  registerAgent(FALLBACK_AGENT, withoutChannel);

  const fakePi = {
    command: fakes.nodeTurn,
    agentDir: fakes.agentDir,
    env: { SESSIOND_STATE_DIR: fakes.stateDir },
    extraArgs: ['--steer'],
  };
  const prefix = `bench-steer-${randomBytes(3).toString('hex')}`;
  const { connect, closeAll } = connector(redis.url);
  const runtime = new Runtime({ connect, prefix });
  const problems: string[] = [];
  const worker = benchWorker(connect, createKeys(prefix), {
    concurrency: CONCURRENCY,
    agentOptions: { pi: fakePi, [FALLBACK_AGENT]: fakePi },
    log: (level, message, fields) => {
      if (level !== 'info') problems.push(`${level}: ${message} ${JSON.stringify(fields ?? {})}`);
    },
  });
  cleanup.add('worker', async () => {
    await worker.close(2000).catch(() => undefined);
    await runtime.close().catch(() => undefined);
    closeAll();
  });
  await internals(runtime).redis.ping();
  await worker.start();

  /** Waits for `probe`; past the deadline, fails saying what it waited for and what the session's log holds. */
  const poll = async (what: string, sessionId: string, probe: () => Promise<boolean>): Promise<void> => {
    const until = Date.now() + deadline.cap(60_000);
    while (!(await probe())) {
      if (Date.now() > until) {
        const log = await runtime.readMessages(sessionId);
        const held = log.map((m) => `${m.attempt} ${m.type} ${JSON.stringify(m.content).slice(0, 160)}`);
        throw new BenchFailure(`timed out waiting for ${what}; the session's log: ${held.join('; ')}`);
      }
      await sleep(10);
    }
  };
  /**
   * When the agent had the steer, from what fake pi says in the log: native, when it read the `steer` command (the
   * result of the tool the steer ended); fallback, when the run that goes on with it read its prompt (its tool call).
   */
  const hadSteerAt = async (path: Sample['path'], sessionId: string): Promise<number> => {
    const log = await runtime.readMessages(sessionId);
    const said =
      path === 'native'
        ? log
            .filter((m) => m.type === 'tool.completed')
            .map((m) => /steer arrived at (\d+)/.exec(JSON.stringify(m.content)))
        : log.filter((m) => m.type === 'tool.call').map((m) => /prompt read at (\d+)/.exec(JSON.stringify(m.content)));
    // The fallback's first run read the session's own prompt: the second tool call is the steered run's.
    const at = path === 'native' ? said[0] : said[1];
    return Number(at?.[1] ?? 0);
  };

  const sample = async (path: Sample['path'], n: number): Promise<Sample> => {
    const token = `sample-${n}`;
    const options = path === 'native' ? {} : { agent: FALLBACK_AGENT };
    const { sessionId } = await runtime.enqueue({ prompt: `Build it (${token}).`, options });
    await poll(`${token}: its tool to run`, sessionId, async () =>
      (await runtime.readMessages(sessionId)).some((m) => m.type === 'tool.call'),
    );
    let agentPid: number | null = null;
    if (path === 'fallback')
      await poll(
        `${token}: its fake pi process`,
        sessionId,
        async () => (agentPid = await fakePiOf(sessionId)) !== null,
      );

    const calledAt = Date.now();
    const steer = await runtime.enqueue(
      { sessionId, prompt: `STEER ${token}: use the other branch.`, whenBusy: 'steer' },
      { mustExist: true },
    );
    if (steer.steered !== true || steer.turn !== 1)
      throw new BenchFailure(`${token}: the steer was not taken into turn 1 (${JSON.stringify(steer)})`);
    // The tool boundary comes at once: its tool ends now (fake pi's SIGUSR1).
    if (agentPid !== null) process.kill(agentPid, 'SIGUSR1');
    let hadAt = 0;
    await poll(
      `${token}: the agent to have the steer`,
      sessionId,
      async () => (hadAt = await hadSteerAt(path, sessionId)) > 0,
    );
    // Recorded once (the same fenced write that removed it from the pending steers): native, once the agent took it;
    // the fallback's once a record of the agent's state holds it — here (no workspace, the steered run's tool runs
    // until the cancel) with the state carried out at the attempt's end, so it is checked after the cancel.
    if (path === 'native')
      await poll(`${token}: prompt.steered`, sessionId, async () =>
        (await runtime.readMessages(sessionId)).some((m) => m.type === 'prompt.steered'),
      );

    const cancelAt = Date.now();
    const cancelled = await runtime.cancel(sessionId, 'bench: steer run over');
    if (cancelled.delivered !== 'worker')
      throw new BenchFailure(`${token}: cancel delivered "${String(cancelled.delivered)}", expected "worker"`);
    let view: SessionRecord | null = null;
    await poll(`${token}: cancelled`, sessionId, async () => {
      view = await runtime.getSession(sessionId);
      return view?.state === 'cancelled';
    });
    const ended = view as SessionRecord | null;
    const transition = ended?.history.findLast((h) => h.to === 'cancelled');
    if (ended === null || transition === undefined) throw new BenchFailure(`${token}: no "cancelled" transition`);
    const steered = (await runtime.readMessages(sessionId)).filter((m) => m.type === 'prompt.steered');
    const via = path === 'native' ? 'native' : 'restart';
    if (
      ended.context?.turnIndex !== 1 ||
      ended.steers.length > 0 ||
      steered.length !== 1 ||
      steered[0]?.turn !== 1 ||
      JSON.stringify(steered[0]?.content).includes(`"via":"${via}"`) !== true ||
      JSON.stringify(steered[0]?.content).includes(steer.promptId) !== true
    )
      throw new BenchFailure(
        `${token}: expected one prompt.steered via ${via} in turn 1 and no new turn; got turn ${String(ended.context?.turnIndex)}, ${JSON.stringify(steered.map((m) => m.content))}`,
      );
    return { path, steerMs: hadAt - calledAt, cancelMs: transition.at - cancelAt };
  };

  // One untimed sample of each first, alone: it warms both paths up and makes the first pi attempt write pi's
  // managed settings.json before attempts start concurrently (see the queue benchmark's cancel runs).
  await sample('native', 0);
  await sample('fallback', 1);
  const samples: Sample[] = [];
  const loads: number[] = [];
  for (const path of ['native', 'fallback'] as const) {
    const ns = Array.from({ length: samplesPerPath }, (_, i) => 2 + i + (path === 'native' ? 0 : samplesPerPath));
    loads.push(loadavg()[0] ?? 0);
    await pool(ns, CONCURRENCY, async (n) => void samples.push(await sample(path, n)));
    loads.push(loadavg()[0] ?? 0);
  }

  await withTimeout(
    (async () => {
      while (worker.activeSessions.length > 0) await sleep(20);
    })(),
    deadline.cap(10_000),
    'the worker releasing its sessions',
  );
  const survivors = processesMentioning(fakes.nodeTurn);
  if (survivors.length > 0)
    throw new BenchFailure(`${survivors.length} fake pi processes still alive after their turns were cancelled`);
  if (problems.length > 0)
    throw new BenchFailure(`the worker reported problems:\n  ${problems.slice(0, 5).join('\n  ')}`);

  const of = (path: Sample['path']) => samples.filter((s) => s.path === path).map((s) => s.steerMs);
  const cancels = samples.map((s) => s.cancelMs);
  const figures = {
    nativeP50Ms: percentile(of('native'), 50),
    nativeP99Ms: percentile(of('native'), 99),
    fallbackP50Ms: percentile(of('fallback'), 50),
    fallbackP99Ms: percentile(of('fallback'), 99),
    cancelP50Ms: percentile(cancels, 50),
    cancelP99Ms: percentile(cancels, 99),
  };
  log(
    `${samplesPerPath} sessions per path, ${CONCURRENCY} at once, each steered once at a tool call and then cancelled (one worker, in this process)`,
  );
  log(
    `  enqueue(steer) called → the agent has it: native (fake pi, rpc \`steer\`) p50 ${figures.nativeP50Ms} ms, p99 ${figures.nativeP99Ms} ms`,
  );
  log(
    `                                             fallback (restart at the tool boundary) p50 ${figures.fallbackP50Ms} ms, p99 ${figures.fallbackP99Ms} ms`,
  );
  log(
    `  cancel() → the "cancelled" transition, same sessions: p50 ${figures.cancelP50Ms} ms, p99 ${figures.cancelP99Ms} ms`,
  );
  log(
    `  checked: each steer accepted into turn 1, recorded prompt.steered once (native / restart), no new turn; no fake pi left`,
  );
  log(`  load average (1 min) at each path's start and end: ${loads.map((l) => l.toFixed(1)).join(', ')}`);
  return {
    bench: 'steer',
    nativeP99Ms: figures.nativeP99Ms,
    fallbackP99Ms: figures.fallbackP99Ms,
    cancelP99Ms: figures.cancelP99Ms,
    nativeP50Ms: figures.nativeP50Ms,
    fallbackP50Ms: figures.fallbackP50Ms,
    cancelP50Ms: figures.cancelP50Ms,
    samples: samplesPerPath,
    load1: loads.map((l) => Number(l.toFixed(1))),
  };
}
