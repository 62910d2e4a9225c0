import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { createWorkspaces, DEFAULT_WORKSPACE_EXCLUDE, type Workspaces } from '../src/workspace/index.ts';
import { BenchFailure } from './support/benchmark.ts';
import { bounded, tempDir } from './support/harness.ts';
import { median, round } from './support/timing.ts';
import { measureAttemptOverhead } from './workspace-attempt.ts';

/**
 * What a workspace snapshot and a cold restore cost (docs/workspaces.md), against plain git:
 * - snapshotRatio: `snapshot()` of a change (1 % of the files rewritten, 5 added), recorded in a
 *   local store (a path: objects written into it in place), ÷ `git add -A && git commit` of the same
 *   change in a plain clone of the same repository, median of ROUNDS rounds (the three steps in a
 *   rotating order), at each size; the figure is the worst size's, each size's is in `bySize`;
 *   snapshotUrlRatio: the same with a `file://` URL store (a push per snapshot);
 * - coldRestoreRatio: `prepare()` of the last snapshot on a host with nothing of the session (a
 *   local store) ÷ `git clone file://…` of the same history (the source and the same changes);
 *   coldRestoreUrlRatio: from a `file://` URL store (a fetch of the session's snapshots, then the
 *   checkout); coldRestoreGcRatio: from the local store after `git gc` packed it.
 * The workspace is a clone of a source repository holding the files (its `.git` is part of every
 * snapshot), as a session started with `--repo` is.
 * - attemptOverhead: an attempt's added latency with workspaces on vs off (workspace-attempt.ts).
 */
export const name = 'workspace';

const SIZES = (process.env.BENCH_WORKSPACE_FILES ?? '1000,10000,50000').split(',').map(Number);
const ROUNDS = Number(process.env.BENCH_WORKSPACE_ROUNDS ?? 5);
const TIME_LIMIT_MS = 20 * 60_000;
const FILES_PER_DIR = 100;
const ADDED = 5;

const run$ = promisify(execFile);
const gitEnv = {
  PATH: process.env.PATH ?? '/usr/bin:/bin',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  HOME: '/nonexistent',
  GIT_AUTHOR_NAME: 'bench',
  GIT_AUTHOR_EMAIL: 'bench@localhost',
  GIT_COMMITTER_NAME: 'bench',
  GIT_COMMITTER_EMAIL: 'bench@localhost',
};
const git = (cwd: string, ...args: string[]): Promise<unknown> =>
  run$('git', args, { cwd, env: gitEnv, maxBuffer: 256 * 1024 * 1024 });

function fileName(i: number): string {
  return join(`d${Math.floor(i / FILES_PER_DIR)}`, `f${i}.txt`);
}

/** Writes `count` files of ~200 bytes in directories of FILES_PER_DIR. */
function writeTree(root: string, count: number): void {
  for (let d = 0; d * FILES_PER_DIR < count; d++) mkdirSync(join(root, `d${d}`), { recursive: true });
  for (let i = 0; i < count; i++) writeFileSync(join(root, fileName(i)), `file ${i}\n${'x'.repeat(190)}\n`);
}

/** Round r's change: 1 % of the files rewritten (a different 1 % each round), ADDED new files. */
function change(root: string, count: number, r: number): void {
  const step = 100;
  for (let i = r % step; i < count; i += step) writeFileSync(join(root, fileName(i)), `file ${i} round ${r}\n`);
  for (let k = 0; k < ADDED; k++) writeFileSync(join(root, 'added', `r${r}-${k}.txt`), `added ${r} ${k}\n`);
}

/**
 * CPU time (ms) of this process and of every process it waited for (theirs include their own
 * children's: the store's receive-pack, a clone's index-pack), from Linux's /proc; null elsewhere.
 * The children's part counts in whole clock ticks (10 ms), so only sums over rounds are compared.
 */
function cpuMs(): number | null {
  let fields: string[];
  try {
    fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]?.split(' ') ?? [];
  } catch {
    // No /proc (not Linux): wall time only.
    return null;
  }
  const ticks = Number(fields[13]) + Number(fields[14]); // cutime + cstime
  const own = process.cpuUsage();
  return Number.isFinite(ticks) ? ticks * 10 + (own.user + own.system) / 1000 : null;
}

/** Each step's CPU time, summed over its rounds (see cpuMs). */
const cpuSums = new Map<string, number>();

async function timed(fn: () => Promise<unknown>, cpuKey?: string): Promise<number> {
  const cpu = cpuMs();
  const start = performance.now();
  await fn();
  const wall = performance.now() - start;
  const after = cpuMs();
  if (cpuKey !== undefined && cpu !== null && after !== null) {
    cpuSums.set(cpuKey, (cpuSums.get(cpuKey) ?? 0) + after - cpu);
  }
  return wall;
}

async function measureSize(base: string, count: number, log: (line: string) => void) {
  const dir = join(base, `n${count}`);
  const source = join(dir, 'source');
  mkdirSync(source, { recursive: true });
  writeTree(source, count);
  mkdirSync(join(source, 'added'));
  writeFileSync(join(source, 'added', 'keep'), '');
  await git(source, 'init', '-q', '--template=');
  await git(source, 'add', '-A');
  await git(source, 'commit', '-q', '-m', 'source');
  const bare = join(dir, 'source.git');
  await git(dir, 'clone', '-q', '--bare', '--template=', source, bare);

  // Two stores: a local path (used in place, the default deployment's) and a file:// URL (push and
  // fetch, as any remote store).
  const urlStore = join(dir, 'url-store.git');
  await git(dir, 'init', '-q', '--bare', '--template=', urlStore);
  const stores = { path: join(dir, 'store.git'), url: `file://${urlStore}` } as const;
  type Kind = keyof typeof stores;
  const config = (hostName: string, kind: Kind) => ({
    root: join(dir, hostName, 'workspaces'),
    gitDir: join(dir, hostName, 'git'),
    store: stores[kind],
    exclude: DEFAULT_WORKSPACE_EXCLUDE,
    maxBytes: 0,
    maxSnapshots: 0,
  });
  const kinds: Kind[] = ['path', 'url'];
  const hosts = new Map<Kind, { ws: Workspaces; path: string; last: string }>();
  for (const kind of kinds) {
    const ws = createWorkspaces(config(`host-${kind}`, kind));
    const path = await ws.prepare('bench', null, { repo: bare });
    hosts.set(kind, { ws, path, last: (await ws.snapshot('bench', 'start', null)).id });
  }
  const plain = join(dir, 'plain');
  await git(dir, 'clone', '-q', '--template=', bare, plain);

  const times: Record<Kind | 'commit', number[]> = { path: [], url: [], commit: [] };
  const steps: Record<Kind | 'commit', () => Promise<unknown>> = {
    commit: async () => {
      await git(plain, 'add', '-A');
      await git(plain, 'commit', '-q', '-m', 'round');
    },
    path: async () => snapshotOn('path'),
    url: async () => snapshotOn('url'),
  };
  async function snapshotOn(kind: Kind): Promise<void> {
    const h = hosts.get(kind);
    if (h === undefined) throw new BenchFailure(`no ${kind} host`);
    h.last = (await h.ws.snapshot('bench', 'round', h.last)).id;
  }
  const order: (Kind | 'commit')[] = ['commit', 'path', 'url'];
  for (let r = 0; r < ROUNDS; r++) {
    change(plain, count, r);
    for (const h of hosts.values()) change(h.path, count, r);
    // Each round in another order, so none always runs on a warmer cache.
    for (let k = 0; k < order.length; k++) {
      const step = order[(k + r) % order.length] ?? 'commit';
      times[step].push(await timed(steps[step], `${count} ${step}`));
    }
  }
  const history = join(dir, 'history.git');
  await git(dir, 'clone', '-q', '--bare', '--template=', plain, history);

  // Cold restore: a new host each time, against a fresh clone of the same history.
  const restores: Record<Kind, number[]> = { path: [], url: [] };
  const clones: number[] = [];
  const expected = readFileSync(join(plain, fileName(count - 1)), 'utf8');
  for (let r = 0; r < Math.max(1, Math.min(ROUNDS, 3)); r++) {
    clones.push(
      await timed(
        () => git(dir, 'clone', '-q', '--template=', `file://${history}`, join(dir, `clone${r}`)),
        `${count} clone`,
      ),
    );
    for (const kind of kinds) {
      const cold = createWorkspaces(config(`cold-${kind}-${r}`, kind));
      restores[kind].push(
        await timed(() => cold.prepare('bench', hosts.get(kind)?.last ?? ''), `${count} cold ${kind}`),
      );
      if (readFileSync(join(cold.path('bench'), fileName(count - 1)), 'utf8') !== expected) {
        throw new BenchFailure(
          `the cold restore (${kind} store) of ${count} files does not match the plain repository`,
        );
      }
    }
  }
  // The local store as snapshots leave it holds their objects loose; after `git gc` (which the
  // operator runs, docs/workspaces.md), packed.
  await git(dir, '--git-dir', stores.path, 'gc', '--quiet');
  const packed: number[] = [];
  for (let r = 0; r < Math.max(1, Math.min(ROUNDS, 3)); r++) {
    const cold = createWorkspaces(config(`cold-gc-${r}`, 'path'));
    packed.push(await timed(() => cold.prepare('bench', hosts.get('path')?.last ?? '')));
  }
  const ratio = (a: number[], b: number[]): number => round(median(a) / median(b), 2);
  const cpuRatio = (a: string, b: string): number | null => {
    const x = cpuSums.get(`${count} ${a}`);
    const y = cpuSums.get(`${count} ${b}`);
    return x === undefined || y === undefined || y <= 0 ? null : round(x / y, 2);
  };
  const figures = {
    files: count,
    commitMs: round(median(times.commit), 1),
    snapshotMs: round(median(times.path), 1),
    snapshotRatio: ratio(times.path, times.commit),
    snapshotUrlMs: round(median(times.url), 1),
    snapshotUrlRatio: ratio(times.url, times.commit),
    cloneMs: round(median(clones), 1),
    coldRestoreMs: round(median(restores.path), 1),
    coldRestoreRatio: ratio(restores.path, clones),
    coldRestoreGcMs: round(median(packed), 1),
    coldRestoreGcRatio: ratio(packed, clones),
    coldRestoreUrlMs: round(median(restores.url), 1),
    coldRestoreUrlRatio: ratio(restores.url, clones),
    // The same, in CPU time summed over the rounds: what the host's load blurs less than wall time.
    cpu: {
      snapshotRatio: cpuRatio('path', 'commit'),
      snapshotUrlRatio: cpuRatio('url', 'commit'),
      coldRestoreRatio: cpuRatio('cold path', 'clone'),
      coldRestoreUrlRatio: cpuRatio('cold url', 'clone'),
    },
  };
  log(
    `${count} files: add+commit ${figures.commitMs} ms; snapshot ${figures.snapshotMs} ms (${figures.snapshotRatio}×), ` +
      `to a file:// store ${figures.snapshotUrlMs} ms (${figures.snapshotUrlRatio}×); clone ${figures.cloneMs} ms; ` +
      `cold restore ${figures.coldRestoreMs} ms (${figures.coldRestoreRatio}×), ` +
      `after git gc ${figures.coldRestoreGcMs} ms (${figures.coldRestoreGcRatio}×), ` +
      `from a file:// store ${figures.coldRestoreUrlMs} ms (${figures.coldRestoreUrlRatio}×); in CPU time: ` +
      `snapshot ${figures.cpu.snapshotRatio}×, to a file:// store ${figures.cpu.snapshotUrlRatio}×, ` +
      `cold restore ${figures.cpu.coldRestoreRatio}×, from a file:// store ${figures.cpu.coldRestoreUrlRatio}×`,
  );
  return figures;
}

/** The largest figure, null when a size has none (no /proc). */
function worst(figures: readonly (number | null)[]): number | null {
  return figures.some((f) => f === null) ? null : Math.max(...(figures as number[]));
}

export async function run(log: (line: string) => void = console.log): Promise<Record<string, unknown>> {
  if (SIZES.some((n) => !Number.isSafeInteger(n) || n < 100)) {
    throw new BenchFailure(
      `BENCH_WORKSPACE_FILES: a comma-separated list of file counts ≥ 100 (got ${SIZES.join(',')})`,
    );
  }
  return bounded(name, TIME_LIMIT_MS, log, async (cleanup) => {
    const base = tempDir('sessiond-bench-workspace-', cleanup);
    const bySize = [];
    for (const count of SIZES) bySize.push(await measureSize(base, count, log));
    const attempt = await measureAttemptOverhead(cleanup, log);
    return {
      bench: name,
      snapshotRatio: Math.max(...bySize.map((s) => s.snapshotRatio)),
      attemptOverhead: attempt.attemptOverhead,
      coldRestoreRatio: Math.max(...bySize.map((s) => s.coldRestoreRatio)),
      snapshotUrlRatio: Math.max(...bySize.map((s) => s.snapshotUrlRatio)),
      coldRestoreUrlRatio: Math.max(...bySize.map((s) => s.coldRestoreUrlRatio)),
      cpuSnapshotRatio: worst(bySize.map((s) => s.cpu.snapshotRatio)),
      cpuColdRestoreRatio: worst(bySize.map((s) => s.cpu.coldRestoreRatio)),
      rounds: ROUNDS,
      bySize,
      attempt,
    };
  });
}
