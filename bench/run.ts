import { arch, cpus, platform, release, totalmem } from 'node:os';
import * as machineBench from './machine.ts';
import * as mapper from './mapper.ts';
import * as queueBench from './queue.ts';
import { BenchFailure, type Benchmark } from './support/benchmark.ts';

/**
 * `npm run bench [-- [--json] [name ...]]`: runs the named benchmarks (all when
 * none is named), in registry order. Each prints its human lines, then one
 * JSON object as its last line. With --json the human lines go to stderr and
 * stdout gets a single JSON document at the end:
 * `{"benchmarks":[<each final object>], "machine":{…}}`.
 * Exit 0; 1 when a benchmark failed (its own check, or it threw); 2 on bad arguments.
 */

/** Every benchmark, in the order they run. A new one is a module in bench/ exporting `name` and `run`, added here. */
const BENCHMARKS: readonly Benchmark[] = [mapper, machineBench, queueBench];

const USAGE = `usage: npm run bench -- [--json] [name ...]\nbenchmarks: ${BENCHMARKS.map((b) => b.name).join(', ')}`;

function parseArgs(argv: readonly string[]): { json: boolean; selected: Benchmark[] } | { exit: number; message: string } {
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
    return { exit: 2, message: `unknown benchmark${unknown.length > 1 ? 's' : ''}: ${unknown.map((n) => `"${n}"`).join(', ')}; known: ${known}` };
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
  };
}

async function main(): Promise<number> {
  const args = parseArgs(process.argv.slice(2));
  if ('exit' in args) {
    (args.exit === 0 ? console.log : console.error)(args.message);
    return args.exit;
  }
  const human = args.json ? (line: string) => console.error(line) : (line: string) => console.log(line);
  const finals: Record<string, unknown>[] = [];
  let failed = false;
  for (const benchmark of args.selected) {
    human(`# ${benchmark.name}`);
    let final: Record<string, unknown>;
    try {
      final = await benchmark.run(human);
    } catch (error) {
      failed = true;
      const why = error instanceof BenchFailure ? error.message : error instanceof Error ? (error.stack ?? error.message) : String(error);
      console.error(`${benchmark.name}: FAILED: ${why}`);
      final = { bench: benchmark.name, failed: true, error: error instanceof Error ? error.message : String(error) };
    }
    human(JSON.stringify(final));
    finals.push(final);
  }
  if (args.json) console.log(JSON.stringify({ benchmarks: finals, machine: machine() }));
  return failed ? 1 : 0;
}

process.exitCode = await main();
