import { arch, cpus, loadavg, platform, release, totalmem } from 'node:os';
import * as cli from './cli.ts';
import * as clusterBench from './cluster.ts';
import * as e2e from './e2e.ts';
import * as egressBench from './egress.ts';
import * as history from './history.ts';
import * as machineBench from './machine.ts';
import * as mapper from './mapper.ts';
import * as peers from './peers.ts';
import * as queueBench from './queue.ts';
import * as sandboxBench from './sandbox.ts';
import * as takeover from './takeover.ts';
import * as scaling from './scaling.ts';
import * as steerBench from './steer.ts';
import * as workspaceBench from './workspace.ts';
import * as webhooksBench from './webhooks.ts';
import { BenchFailure, type Benchmark } from './support/benchmark.ts';
import { bringUpLoopback, inIsolatedNetwork, isolationProblem, rerunIsolated } from './support/isolated-network.ts';
import { restateServerBinary } from './peers/restate/harness.ts';

/**
 * `npm run bench [-- [--json] [name ...]]`: runs the named benchmarks (all when
 * none is named), in registry order. Each prints its human lines, then one
 * JSON object as its last line. With --json the human lines go to stderr and
 * stdout gets a single JSON document at the end:
 * `{"benchmarks":[<each final object>], "machine":{…}}` (use `npm run --silent`
 * to keep npm's banner out of stdout).
 * Exit 0; 1 when a benchmark failed (its own check, or it threw) or the whole
 * run went past TOTAL_LIMIT_MS; 2 on bad arguments.
 */

/** Every benchmark, in the order they run. A new one is a module in bench/ exporting `name` and `run`, added here. */
const BENCHMARKS: readonly Benchmark[] = [
  mapper,
  machineBench,
  queueBench,
  e2e,
  scaling,
  history,
  cli,
  peers,
  takeover,
  clusterBench,
  sandboxBench,
  egressBench,
  workspaceBench,
  webhooksBench,
  steerBench,
];

/**
 * The whole run's bound (BENCH_TOTAL_LIMIT_MS, default 25 min; a full run takes about 12-15 min on
 * 2 cores, peers ~7.5 of them). Each benchmark that starts processes has a limit of its own and cleans up after it;
 * this is the backstop: past it, the running benchmark is abandoned and marked failed, the others
 * are not started, the JSON document is printed and the process exits. What the abandoned one
 * started dies with this process: redis-servers by test/support/redis.ts's exit hook and reaper,
 * worker processes by their tie to this process (support/worker-probe.mjs), and they stop their agents.
 */
const TOTAL_LIMIT_MS = Number(process.env.BENCH_TOTAL_LIMIT_MS ?? 25 * 60_000);
const LIMIT_TEXT = `${Number((TOTAL_LIMIT_MS / 60_000).toFixed(2))} min`;

const USAGE = `usage: npm run bench -- [--json] [name ...]\nbenchmarks: ${BENCHMARKS.map((b) => b.name).join(', ')}`;

function parseArgs(
  argv: readonly string[],
): { json: boolean; selected: Benchmark[] } | { exit: number; message: string } {
  let json = false;
  const names: string[] = [];
  for (const arg of argv) {
    if (arg === '--json') json = true;
    else if (arg === '-h' || arg === '--help') return { exit: 0, message: USAGE };
    else if (arg.startsWith('-')) return { exit: 2, message: `unknown option "${arg}"\n${USAGE}` };
    else if (!names.includes(arg)) names.push(arg);
  }
  const unknown = names.filter((n) => !BENCHMARKS.some((b) => b.name === n));
  if (unknown.length > 0) {
    const known = BENCHMARKS.map((b) => b.name).join(', ');
    return {
      exit: 2,
      message: `unknown benchmark${unknown.length > 1 ? 's' : ''}: ${unknown.map((n) => `"${n}"`).join(', ')}; known: ${known}`,
    };
  }
  return { json, selected: names.length === 0 ? [...BENCHMARKS] : BENCHMARKS.filter((b) => names.includes(b.name)) };
}

function machine(): Record<string, unknown> {
  const cpu = cpus();
  return {
    node: process.version,
    v8: process.versions.v8,
    cpus: cpu.length,
    cpuModel: cpu[0]?.model.trim() ?? 'unknown',
    os: `${platform()} ${release()}`,
    arch: arch(),
    memoryGb: Math.round(totalmem() / 2 ** 30),
    /** 1, 5 and 15 min, when the run ended: the machine may be shared. */
    loadAverageAtEnd: loadavg().map((l) => Math.round(l * 100) / 100),
  };
}

async function main(): Promise<number> {
  const args = parseArgs(process.argv.slice(2));
  if ('exit' in args) {
    (args.exit === 0 ? console.log : console.error)(args.message);
    return args.exit;
  }
  const human = args.json ? (line: string) => console.error(line) : (line: string) => console.log(line);
  if (args.selected.includes(peers) && !inIsolatedNetwork()) {
    // Restate's server calls out at start-up: the whole run goes into a network namespace of its
    // own (installing Restate first, while the registry can still be reached).
    const problem = isolationProblem();
    if (problem !== null) {
      console.error(
        `bench: peers needs a network namespace with only loopback (restate-server contacts api.github.com at start-up): ${problem}`,
      );
      return 1;
    }
    restateServerBinary(human);
    return rerunIsolated();
  }
  if (inIsolatedNetwork()) bringUpLoopback();
  const finals: Record<string, unknown>[] = [];
  let failed = false;
  let abandoned = false;
  const startedAt = Date.now();
  for (const benchmark of args.selected) {
    const left = TOTAL_LIMIT_MS - (Date.now() - startedAt);
    if (abandoned || left <= 0) {
      failed = true;
      const final = { bench: benchmark.name, failed: true, error: `not run: the whole run went past ${LIMIT_TEXT}` };
      human(JSON.stringify(final));
      finals.push(final);
      continue;
    }
    // The machine may be shared: what else ran is part of the figures.
    human(
      `# ${benchmark.name} (load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')} on ${cpus().length} cores)`,
    );
    let final: Record<string, unknown>;
    try {
      let timer: NodeJS.Timeout | undefined;
      const overLimit = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          abandoned = true;
          reject(new BenchFailure(`abandoned: the whole run went past ${LIMIT_TEXT}`));
        }, left);
      });
      try {
        const running = benchmark.run(human);
        // Once abandoned, its failure (as its processes go) is nobody's concern.
        running.catch(() => undefined);
        final = await Promise.race([running, overLimit]);
      } finally {
        clearTimeout(timer);
      }
    } catch (error) {
      failed = true;
      const why =
        error instanceof BenchFailure
          ? error.message
          : error instanceof Error
            ? (error.stack ?? error.message)
            : String(error);
      console.error(`${benchmark.name}: FAILED: ${why}`);
      final = { bench: benchmark.name, failed: true, error: error instanceof Error ? error.message : String(error) };
    }
    human(JSON.stringify(final));
    finals.push(final);
  }
  if (args.json) console.log(JSON.stringify({ benchmarks: finals, machine: machine() }));
  // An abandoned benchmark may still hold timers and connections: end here rather than wait for them.
  if (abandoned) process.exit(1);
  return failed ? 1 : 0;
}

process.exitCode = await main();
