import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BenchFailure } from './benchmark.ts';
import type { Runtime } from '../../src/runtime/runtime.ts';
import { internals } from '../../src/runtime/internals.ts';

/**
 * Plumbing shared by the process-level benchmarks (e2e, scaling): cleanup in
 * reverse order whatever happens, one deadline for a whole benchmark, timeouts,
 * a bounded-concurrency pool, percentiles and /proc readings.
 */

/** Everything started here, stopped in reverse order whatever happens. */
export class Cleanup {
  readonly #steps: Array<{ what: string; fn: () => Promise<void> | void }> = [];

  /** Registers a step; the returned function runs it now (once) and unregisters it. */
  add(what: string, fn: () => Promise<void> | void): () => Promise<void> {
    const step = { what, fn };
    this.#steps.push(step);
    return async () => {
      const i = this.#steps.indexOf(step);
      if (i < 0) return;
      this.#steps.splice(i, 1);
      await step.fn();
    };
  }

  async run(log: (line: string) => void): Promise<void> {
    for (let step = this.#steps.pop(); step !== undefined; step = this.#steps.pop()) {
      try {
        await withTimeout(Promise.resolve(step.fn()), 20_000, `cleanup: ${step.what}`);
      } catch (error) {
        log(`  cleanup: ${step.what}: ${(error as Error).message}`);
      }
    }
  }
}

export class Deadline {
  readonly #at: number;
  constructor(ms: number) {
    this.#at = Date.now() + ms;
  }
  /** `ms`, cut to what is left of the whole run. */
  cap(ms: number): number {
    return Math.max(0, Math.min(ms, this.#at - Date.now()));
  }
}

export function withTimeout<T>(promise: Promise<T>, ms: number, what: string | (() => string)): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new BenchFailure(`timed out after ${(ms / 1000).toFixed(1)} s: ${typeof what === 'string' ? what : what()}`),
        ),
      ms,
    );
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Runs `measure` under a watchdog of `limitMs`, then the cleanup, whatever
 * happened. After a timeout, what is still running fails as cleanup stops the
 * processes it talks to: nobody waits for it.
 */
export async function bounded<T>(
  what: string,
  limitMs: number,
  log: (line: string) => void,
  measure: (cleanup: Cleanup, deadline: Deadline) => Promise<T>,
): Promise<T> {
  const cleanup = new Cleanup();
  const deadline = new Deadline(limitMs);
  let watchdog: NodeJS.Timeout | undefined;
  const overall = new Promise<never>((_, reject) => {
    watchdog = setTimeout(
      () =>
        reject(new BenchFailure(`the ${what} benchmark did not finish within ${(limitMs / 60_000).toFixed(1)} min`)),
      limitMs,
    );
  });
  const work = measure(cleanup, deadline);
  work.catch(() => undefined);
  try {
    return await Promise.race([work, overall]);
  } finally {
    clearTimeout(watchdog);
    await cleanup.run(log);
  }
}

/** A fresh temp dir, removed by `cleanup`, or when this process exits if cleanup never ran (an abandoned run). */
export function tempDir(prefix: string, cleanup: Cleanup): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const remove = (): void => rmSync(dir, { recursive: true, force: true });
  process.once('exit', remove);
  cleanup.add(`temp dir ${dir}`, () => {
    process.removeListener('exit', remove);
    remove();
  });
  return dir;
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs `fn` over `items` with at most `limit` calls in flight. */
export async function pool<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  const lane = async (): Promise<void> => {
    for (let i = next++; i < items.length; i = next++) await fn(items[i] as T);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
}

/** Nearest-rank percentile. */
export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? Number.NaN;
}

export function orNull(value: number): number | null {
  return Number.isFinite(value) ? value : null;
}

/** CPU of a process from /proc/<pid>/stat, in ms: its own (utime + stime) and that of its children it waited for (cutime + cstime). NaN off Linux. */
export function procCpuMs(pid: number | 'self'): { ownMs: number; childrenMs: number } {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 14-17 of proc(5), counted from 3 here; in USER_HZ (100) ticks.
    return {
      ownMs: (Number(fields[11]) + Number(fields[12])) * 10,
      childrenMs: (Number(fields[13]) + Number(fields[14])) * 10,
    };
  } catch {
    return { ownMs: Number.NaN, childrenMs: Number.NaN };
  }
}

/** VmRSS of a process in bytes, from /proc/<pid>/status (NaN off Linux or when it is gone). */
export function procRssBytes(pid: number): number {
  try {
    const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match === null ? Number.NaN : Number(match[1]) * 1024;
  } catch {
    return Number.NaN;
  }
}

/** Processes whose command line mentions `needle` (Linux /proc; [] elsewhere). */
export function processesMentioning(needle: string): number[] {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  const found: number[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(needle)) found.push(Number(entry));
    } catch {
      // gone
    }
  }
  return found;
}

/**
 * Every session of `ids` completed, its log exactly `messages` long (XLEN);
 * a few read back in full: seq 1..messages, one turn, one attempt,
 * session.started, assistant deltas, terminal.completed.
 */
export async function verifySessions(runtime: Runtime, ids: readonly string[], messages: number): Promise<void> {
  const { redis, store } = internals(runtime);
  const states = await runtime.sessionStates(ids);
  const notCompleted = ids.filter((id) => states[id] !== 'completed');
  if (notCompleted.length > 0) {
    const id = notCompleted[0] ?? '';
    const last = (await runtime.readMessages(id, 1, 1000)).at(-1);
    throw new BenchFailure(
      `${notCompleted.length} sessions not completed, e.g. ${id}: ${states[id] ?? 'no state'} (last message: ${JSON.stringify(last ?? null).slice(0, 400)})`,
    );
  }
  const pipeline = redis.pipeline();
  for (const id of ids) pipeline.xlen(store.key(id, 'log'));
  const lengths = ((await pipeline.exec()) ?? []).map(([error, value]) => (error === null ? Number(value) : -1));
  const wrong = ids.map((id, i) => [id, lengths[i]] as const).filter(([, len]) => len !== messages);
  if (wrong.length > 0)
    throw new BenchFailure(
      `${wrong.length} sessions have a log of the wrong length, e.g. ${wrong[0]?.[0]}: ${wrong[0]?.[1]} (expected ${messages})`,
    );
  for (const id of [ids[0], ids[Math.floor(ids.length / 2)], ids[ids.length - 1]]) {
    if (id === undefined) continue;
    const read = await runtime.readMessages(id, 1, messages + 10);
    const bad = read.findIndex((m, i) => m.seq !== i + 1 || m.turn !== 1 || m.attempt !== 1);
    const types = read.map((m) => m.type);
    if (
      read.length !== messages ||
      bad >= 0 ||
      types[0] !== 'session.started' ||
      types.at(-1) !== 'terminal.completed' ||
      types.slice(1, -1).some((t) => t !== 'assistant')
    ) {
      throw new BenchFailure(
        `session ${id}: messages read back do not match (${read.length} read, first bad index ${bad}, types ${types.slice(0, 3).join(',')}…${types.at(-1)})`,
      );
    }
  }
}

/**
 * Builds the checkout at `root` (`npm run build`) when its package has a build script, so that what
 * a benchmark runs of its dist/ is what these sources give.
 */
export function buildCheckout(root: string): void {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts?: Record<string, string> };
  if (pkg.scripts?.build === undefined) return;
  const build = spawnSync('npm', ['run', '--silent', 'build'], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
  if (build.status !== 0)
    throw new BenchFailure(`npm run build in ${root} exited with ${build.status ?? build.signal}`);
}
