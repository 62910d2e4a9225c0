import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { BenchFailure } from './benchmark.ts';
import { withTimeout, type Cleanup } from './harness.ts';

/**
 * A real `node bin/sessiond.mjs worker` process, configured as an operator
 * would (environment variables only, see src/config/config.ts), watched
 * through its stderr: the pino line "session released" of every session it
 * lets go, its warnings and errors, and the memory probe's answers
 * (support/worker-probe.mjs, preloaded with --import: SIGUSR2 → one line).
 */
export interface WorkerProcessOptions {
  url: string;
  prefix: string;
  concurrency: number;
  /** SESSIOND_PI_COMMAND: the fake pi to run. */
  piCommand: string;
  /** SESSIOND_PI_ARGS. */
  piArgs?: readonly string[];
  stateDir: string;
  agentDir: string;
  /** Called for each "session released" line, with its outcome (released, parked, interrupted…). */
  onReleased?: (sessionId: string, outcome: string) => void;
  startTimeoutMs?: number;
  /** More environment variables for the worker (e.g. SESSIOND_LEASE_TTL), set last. */
  env?: Record<string, string>;
}

export interface MemoryProbe {
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  arrayBuffers: number;
}

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..', '..');
// The sources through tsx, as these benchmarks have always measured the worker (bench/cli.ts measures the compiled bin).
const BIN = join(ROOT, 'bin', 'sessiond-dev.mjs');
const PROBE = pathToFileURL(join(HERE, 'worker-probe.mjs')).href;
const PROBE_PREFIX = 'bench-memory-probe ';

export class WorkerProcess {
  readonly #child: ChildProcess;
  readonly #exited: Promise<void>;
  /** Warnings and errors the worker logged (pino level ≥ 40), and anything on stderr that is not a log line. */
  readonly problems: string[] = [];
  #probeWaiters: Array<(m: MemoryProbe) => void> = [];
  released = 0;

  private constructor(child: ChildProcess) {
    this.#child = child;
    this.#exited = new Promise((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve();
      else child.once('exit', () => resolve());
    });
  }

  get pid(): number {
    return this.#child.pid ?? -1;
  }

  get alive(): boolean {
    return this.#child.exitCode === null && this.#child.signalCode === null;
  }

  /** Starts a worker and resolves once it says it started (its queue connection is ready). Registered with `cleanup`. */
  static async start(options: WorkerProcessOptions, cleanup: Cleanup): Promise<WorkerProcess> {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      REDIS_URL: options.url,
      SESSIOND_PREFIX: options.prefix,
      SESSIOND_CONCURRENCY: String(options.concurrency),
      SESSIOND_PI_COMMAND: options.piCommand,
      SESSIOND_PI_ARGS: JSON.stringify(options.piArgs ?? []),
      SESSIOND_PI_AGENT_DIR: options.agentDir,
      SESSIOND_STATE_DIR: options.stateDir,
      SESSIOND_SHUTDOWN_GRACE: '2s',
      SESSIOND_LOG_LEVEL: 'info',
      SESSIOND_CONFIG: '',
      // Workspaces off (on by default): these measure the queue and the agent's path against baselines
      // without one; bench/workspace*.ts measures workspaces.
      SESSIOND_WORKSPACES_ENABLED: 'false',
      ...options.env,
    };
    const child = spawn(process.execPath, ['--import', PROBE, BIN, 'worker'], {
      cwd: ROOT,
      env,
      stdio: ['pipe', 'ignore', 'pipe'],
    });
    const worker = new WorkerProcess(child);
    cleanup.add(`worker ${child.pid ?? '?'}`, () => worker.stop());
    let started: () => void = () => undefined;
    let failed: (error: Error) => void = () => undefined;
    const ready = new Promise<void>((resolve, reject) => {
      started = resolve;
      failed = reject;
    });
    const tail: string[] = [];
    child.once('error', (error) => failed(error));
    child.once('exit', (code, signal) =>
      failed(new BenchFailure(`worker exited (${code ?? signal}) before it started:\n${tail.join('\n')}`)),
    );
    child.stdin?.on('error', () => undefined);
    createInterface({ input: child.stderr as NodeJS.ReadableStream }).on('line', (line) => {
      if (line.startsWith(PROBE_PREFIX)) {
        const m = JSON.parse(line.slice(PROBE_PREFIX.length)) as MemoryProbe;
        const waiters = worker.#probeWaiters;
        worker.#probeWaiters = [];
        for (const w of waiters) w(m);
        return;
      }
      if (line.startsWith('sessiond worker ') && line.includes(' started ')) return started();
      let entry: { level?: unknown; msg?: unknown; sessionId?: unknown; outcome?: unknown };
      try {
        entry = JSON.parse(line) as typeof entry;
      } catch {
        tail.push(line);
        if (tail.length > 20) tail.shift();
        worker.problems.push(`stderr: ${line.slice(0, 300)}`);
        return;
      }
      if (entry.msg === 'session released' && typeof entry.sessionId === 'string') {
        worker.released += 1;
        options.onReleased?.(entry.sessionId, String(entry.outcome));
      } else if (typeof entry.level === 'number' && entry.level >= 40) {
        worker.problems.push(line.slice(0, 500));
      }
    });
    await withTimeout(ready, options.startTimeoutMs ?? 60_000, `worker ${child.pid ?? '?'} to start`);
    return worker;
  }

  /** A full GC in the worker, then its process.memoryUsage(). */
  probeMemory(timeoutMs = 10_000): Promise<MemoryProbe> {
    const answer = new Promise<MemoryProbe>((resolve) => this.#probeWaiters.push(resolve));
    this.#child.kill('SIGUSR2');
    return withTimeout(answer, timeoutMs, `memory probe of worker ${this.pid}`);
  }

  /** SIGTERM (graceful: the worker stops its attempts within its 2 s grace), SIGKILL after 15 s. Idempotent. */
  async stop(): Promise<void> {
    if (!this.alive) return;
    this.#child.kill('SIGTERM');
    const timer = setTimeout(() => this.#child.kill('SIGKILL'), 15_000);
    await this.#exited;
    clearTimeout(timer);
    this.#child.stdin?.destroy();
  }
}
