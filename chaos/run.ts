/**
 * `npm run chaos [-- --quick] [--only a,b] [--seed N]`: fault injection against real `sessiond
 * worker` processes, a real redis-server, the real pi CLI (fake model server) and a fake agent.
 * Loopback only, bounded in time, stops everything it started (even on failure or Ctrl+C), exits
 * 1 when any check fails. See RELIABILITY.md.
 */
import { cpus, totalmem } from 'node:os';
import { execFileSync } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import { findRedisServer } from '../src/runtime/redis/local-server.ts';
import { Cluster } from './cluster.ts';
import { Random, runScenario, type ScenarioDefinition, type ScenarioResult } from './scenario.ts';
import { agents } from './scenarios/agents.ts';
import { escape, escapeBwrap } from './scenarios/escape.ts';
import { failover, failoverNoWait } from './scenarios/failover.ts';
import { kill9 } from './scenarios/kill9.ts';
import { limits } from './scenarios/limits.ts';
import { races } from './scenarios/races.ts';
import { redisFaults } from './scenarios/redis.ts';
import { sigstop } from './scenarios/sigstop.ts';
import { partition } from './scenarios/partition.ts';

export const SCENARIOS: readonly ScenarioDefinition[] = [
  kill9,
  redisFaults,
  agents,
  races,
  sigstop,
  partition,
  escape,
  escapeBwrap,
  limits,
  failover,
  failoverNoWait,
];

export interface ChaosOptions {
  quick: boolean;
  seed: number;
  only?: readonly string[];
  log?: (line: string) => void;
  /** The whole run is abandoned (failed) after this long. */
  budgetMs?: number;
}

export interface ChaosReport {
  ok: boolean;
  /** Every process the run started carried CHAOS_RUN_ID=<runId>. */
  runId: string;
  seed: number;
  quick: boolean;
  durationMs: number;
  machine: string;
  scenarios: ScenarioResult[];
  summary: string;
}

export function machineDescription(): string {
  const bin = findRedisServer();
  let redis = 'redis-server ?';
  if (bin !== null) {
    try {
      redis = /v=(\S+)/.exec(execFileSync(bin, ['--version'], { encoding: 'utf8' }))?.[1] ?? redis;
      redis = `redis ${redis}`;
    } catch {
      // keep '?'
    }
  }
  return `${cpus().length} cores (${cpus()[0]?.model.trim() ?? '?'}), ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.versions.node}, ${redis}, ${process.platform}`;
}

function describeEnv(env: Readonly<Record<string, string>> | undefined): string {
  const entries = Object.entries(env ?? {});
  return entries.length === 0 ? 'the default env' : entries.map(([k, v]) => `${k}=${v}`).join(' ');
}

function formatResult(r: ScenarioResult, index: number, total: number): string {
  const lines = [
    `== [${index}/${total}] ${r.name}: ${r.title} — ${r.ok ? 'PASS' : 'FAIL'} (${(r.durationMs / 1000).toFixed(1)} s)`,
  ];
  for (const d of r.did) lines.push(`   did:   ${d}`);
  for (const f of r.found) lines.push(`   found: ${f}`);
  for (const c of r.checks) {
    lines.push(`   ${c.ok ? '✓' : '✗'} ${c.name} — ${c.summary}`);
    for (const v of c.violations) lines.push(`       ✗ ${v}`);
  }
  return lines.join('\n');
}

export function summarize(report: Omit<ChaosReport, 'summary' | 'runId'>): string {
  const lines = [
    `chaos summary (${report.quick ? 'quick' : 'full'}, seed ${report.seed}, ${(report.durationMs / 1000).toFixed(0)} s; ${report.machine})`,
  ];
  const width = Math.max(8, ...report.scenarios.map((s) => s.name.length));
  for (const s of report.scenarios) {
    const failed = s.checks.filter((c) => !c.ok);
    lines.push(
      `  ${s.ok ? 'PASS' : 'FAIL'}  ${s.name.padEnd(width)} ${(s.durationMs / 1000).toFixed(0).padStart(4)} s  ${s.checks.length - failed.length}/${s.checks.length} checks${failed.length > 0 ? `; failed: ${failed.map((c) => c.name).join('; ')}` : ''}`,
    );
  }
  lines.push(report.ok ? 'chaos: every check passed' : 'chaos: SOME CHECKS FAILED');
  return lines.join('\n');
}

/** Runs the scenarios against a fresh cluster; always stops everything it started. */
export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const log = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  const started = Date.now();
  const named = options.only !== undefined && options.only.length > 0;
  const chosen = SCENARIOS.filter((s) =>
    named ? (options.only ?? []).includes(s.name) : !(options.quick && s.fullOnly === true),
  );
  const machine = machineDescription();
  log(
    `chaos: ${options.quick ? 'quick' : 'full'} run of ${chosen.map((s) => s.name).join(', ')}; seed ${options.seed}; ${machine}`,
  );
  const results: ScenarioResult[] = [];
  const worldOptions = { log, workers: 3, concurrency: options.quick ? 3 : 4 };
  // The shared world (one redis-server), unless every scenario chosen brings its own.
  const cluster = chosen.some((s) => s.world === undefined) ? await Cluster.start(worldOptions) : null;
  const own = chosen.filter((s) => s.world !== undefined).length;
  const budget = options.budgetMs ?? (options.quick ? 240_000 : 720_000 + own * 240_000);
  let timer: NodeJS.Timeout | undefined;
  try {
    const all = (async () => {
      for (const [i, def] of chosen.entries()) {
        log(`-- ${def.name}: ${def.title}`);
        // The shared workers run with the env the scenario declares (none: the default), restarted when theirs differs.
        if (cluster !== null && def.world === undefined) {
          cluster.setWorkerEnv(def.workerEnv ?? {});
          const restarted = await cluster.applyWorkerEnv();
          if (restarted > 0) log(`   restarted ${restarted} worker(s) with ${describeEnv(def.workerEnv)}`);
        }
        const random = new Random(options.seed + i * 7919);
        const world =
          def.world === undefined
            ? cluster
            : await Cluster.start({
                ...worldOptions,
                ...def.world,
                workerEnv: { ...def.world.workerEnv, ...def.workerEnv },
              });
        if (world === null) throw new Error('no world for the scenario');
        let result: ScenarioResult;
        try {
          result = await runScenario(def, { cluster: world, quick: options.quick, random, log });
        } finally {
          if (world !== cluster) await world.close();
        }
        results.push(result);
        log(formatResult(result, i + 1, chosen.length));
      }
    })();
    // Abandoned over budget, it may fail later against a closed cluster: that is no news.
    all.catch(() => undefined);
    const overBudget = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), budget);
    });
    if ((await Promise.race([all.then(() => 'done' as const), overBudget])) === 'timeout') {
      results.push({
        name: 'budget',
        title: 'the run stays within its time budget',
        durationMs: Date.now() - started,
        did: [],
        found: [],
        checks: [
          {
            name: 'within the time budget',
            ok: false,
            summary: `over ${budget / 1000} s`,
            violations: [`the run did not end within ${budget / 1000} s; abandoned`],
          },
        ],
        ok: false,
      });
    }
  } finally {
    clearTimeout(timer);
    await cluster?.close();
  }
  const partial = {
    ok: results.length > 0 && results.every((r) => r.ok),
    runId: cluster?.runId ?? 'own worlds',
    seed: options.seed,
    quick: options.quick,
    durationMs: Date.now() - started,
    machine,
    scenarios: results,
  };
  const summary = summarize(partial);
  return { ...partial, summary };
}

function parseArgs(argv: readonly string[]): ChaosOptions {
  const options: ChaosOptions = { quick: false, seed: Date.now() % 1_000_000 };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--quick') options.quick = true;
    else if (arg === '--seed') options.seed = Number(argv[++i]);
    else if (arg === '--only') options.only = (argv[++i] ?? '').split(',').filter(Boolean);
    else if (arg === '--help' || arg === '-h') {
      process.stdout.write(
        `usage: npm run chaos [-- --quick] [--only ${SCENARIOS.map((s) => s.name).join(',')}] [--seed N]\n`,
      );
      process.exit(0);
    } else {
      process.stderr.write(`chaos: unknown argument ${arg}\n`);
      process.exit(2);
    }
  }
  if (!Number.isInteger(options.seed)) {
    process.stderr.write('chaos: --seed must be an integer\n');
    process.exit(2);
  }
  const unknown = (options.only ?? []).filter((n) => !SCENARIOS.some((s) => s.name === n));
  if (unknown.length > 0) {
    process.stderr.write(
      `chaos: unknown scenario(s) ${unknown.join(', ')}; known: ${SCENARIOS.map((s) => s.name).join(', ')}\n`,
    );
    process.exit(2);
  }
  return options;
}

async function main(): Promise<void> {
  const options = parseArgs(process.argv.slice(2));
  // Ctrl+C / SIGTERM: 'exit' hooks kill every process of the run (workers, agents, redis-server).
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      process.stderr.write(`chaos: ${signal}: stopping everything it started\n`);
      process.exit(130);
    });
  }
  const report = await runChaos(options);
  process.stdout.write(`\n${report.summary}\n`);
  process.exitCode = report.ok ? 0 : 1;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main()
    .catch((error: unknown) => {
      process.stderr.write(`chaos: ${(error as Error).stack ?? String(error)}\n`);
      process.exitCode = 1;
    })
    .finally(() => {
      // Lingering handles (a reconnecting Redis client…) must not keep the run alive.
      setTimeout(() => process.exit(process.exitCode ?? 0), 500).unref();
    });
}
