/**
 * What every chaos scenario shares: a ledger of what it asked for, a witness sampling leases and
 * agent processes while it runs, and the checks run after it (checks.ts), plus its own findings.
 */
import {
  check,
  checkLogs,
  checkNoStrayProcesses,
  checkSettled,
  checkSingleDriver,
  checkTurns,
  sleep,
  type CheckResult,
} from './checks.ts';

export { check, sleep } from './checks.ts';
import type { Cluster, ClusterOptions } from './cluster.ts';
import { Ledger } from './ledger.ts';
import { Witness } from './witness.ts';
import { Random } from '../bench/support/random.ts';

/** The benchmarks' seeded PRNG (mulberry32): the same seed gives the same choices. */
export { Random };

export interface ScenarioContext {
  cluster: Cluster;
  quick: boolean;
  random: Random;
  log: (line: string) => void;
}

/** What a scenario body reports besides the ledger: what it did, what it found, its own checks. */
export interface ScenarioNotes {
  did: string[];
  found: string[];
  checks: CheckResult[];
}

export interface ScenarioDefinition {
  name: string;
  title: string;
  /** How long the sessions may take to settle once the body is done. */
  settleMs: number;
  run(ctx: ScenarioContext, ledger: Ledger, notes: ScenarioNotes): Promise<void>;
  /**
   * More environment for the workers while this scenario runs (SESSIOND_SANDBOX, SESSIOND_LIMITS…):
   * the run's shared workers are restarted with it before the scenario, and without it before the
   * next one that does not declare the same; a world of its own starts its workers with it.
   */
  workerEnv?: Readonly<Record<string, string>>;
  /** A world of its own (started for this scenario, stopped after it) instead of the run's shared one. */
  world?: Pick<ClusterOptions, 'backend' | 'queuePartitions' | 'workerEnv'>;
  /** false: its checks are run and reported, but a failed one does not fail the run (what is known to be lost, reported). Default true. */
  enforced?: boolean;
  /** Not part of a --quick run (unless named with --only). */
  fullOnly?: boolean;
}

export interface ScenarioResult {
  name: string;
  title: string;
  durationMs: number;
  did: string[];
  found: string[];
  checks: CheckResult[];
  ok: boolean;
}

/** Waits for `probe` to return something truthy; null after `timeoutMs`. */
export async function waitFor<T>(
  probe: () => Promise<T | null | undefined | false> | T | null | undefined | false,
  timeoutMs: number,
  everyMs = 100,
): Promise<T | null> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== null && value !== undefined && value !== false) return value;
    if (Date.now() > deadline) return null;
    await sleep(everyMs);
  }
}

/** Runs one scenario, then every check; never throws (an error of the body is a failed check). */
export async function runScenario(def: ScenarioDefinition, ctx: ScenarioContext): Promise<ScenarioResult> {
  const started = Date.now();
  const ledger = new Ledger(def.name);
  const notes: ScenarioNotes = { did: [], found: [], checks: [] };
  const witness = new Witness(ctx.cluster, () => ledger.ids());
  witness.start();
  const checks: CheckResult[] = [];
  try {
    await def.run(ctx, ledger, notes);
  } catch (error) {
    checks.push(
      check('scenario ran to its end', [`the scenario failed: ${(error as Error).stack ?? String(error)}`], 'it threw'),
    );
  }
  try {
    const settled = await checkSettled(ctx.cluster.runtime, ledger, def.settleMs);
    checks.push(settled);
    // Agents stopping and orphans being reaped: give them their grace before judging.
    await sleep(1500);
    const stray = await checkNoStrayProcesses(ctx.cluster, witness.report, 15_000);
    const report = await witness.stop();
    checks.push(
      await checkTurns(ctx.cluster.runtime, ledger),
      await checkLogs(ctx.cluster.runtime, ledger),
      await checkSingleDriver(ctx.cluster.runtime, ledger, report),
      stray,
    );
  } catch (error) {
    await witness.stop();
    checks.push(check('checks ran', [`a check failed to run: ${(error as Error).stack ?? String(error)}`], 'it threw'));
  }
  checks.push(...notes.checks);
  const passed = checks.every((c) => c.ok);
  if (def.enforced === false)
    notes.found.push(
      passed
        ? 'every check passed (not enforced here)'
        : `not enforced here, failed: ${checks
            .filter((c) => !c.ok)
            .map((c) => c.name)
            .join('; ')}`,
    );
  return {
    name: def.name,
    title: def.title,
    durationMs: Date.now() - started,
    did: notes.did,
    found: notes.found,
    checks,
    ok: def.enforced === false || passed,
  };
}
