/**
 * The world a chaos run drives: one real redis-server (AOF on), the fake model server, a pi
 * environment, a fleet of real `sessiond worker` processes (configured by env, the way they run in
 * production) whose agent command is chaos/agent.sh (the fake agent for `--model chaos`, the real
 * pi CLI otherwise), and a Runtime to enqueue, cancel and read through.
 *
 * Every process started here carries CHAOS_RUN_ID=<run id> in its environment (the agents and
 * their tools inherit it), so the run can find, check and finally kill everything it started,
 * whatever happened: `close()` stops it all, and a process 'exit' hook SIGKILLs what is left.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';
import { prepareManagedAgentDir } from '../src/agents/pi/home.ts';
import { AGENT_MARKER_ENV } from '../src/process/index.ts';
import { markerScope, parseMarker, reapOrphans } from '../src/runtime/orphans.ts';
import { Runtime } from '../src/runtime/runtime.ts';
import { startFakeModelServer, type FakeModelServer } from '../test/support/fake-model-server.ts';
import { createPiEnv, piBin, type PiEnv } from '../test/support/pi-env.ts';
import { clusterAsServer, startRedisCluster, type RedisCluster } from '../test/support/redis-cluster.ts';
import { startRedis, uniquePrefix, type RedisServer } from '../test/support/redis.ts';
import { connector, TEST_POLICY } from '../test/support/runtime.ts';
import { AGENT_ENV_NAMES, startWorkerProcess, type WorkerProcess } from '../test/support/worker-process.ts';
import { internals } from '../src/runtime/internals.ts';

export const CHAOS_DIR = dirname(fileURLToPath(import.meta.url));
export const AGENT_COMMAND = join(CHAOS_DIR, 'agent.sh');

/** The model id that selects the fake agent (chaos/agent.sh). */
export const FAKE_MODEL = 'chaos';
/** A fake-model-server model that pi streams for about 2 s. */
export const PI_SLOW_MODEL = 'chaos-pi-slow';
export const PI_SLOW_TEXT =
  'one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen';

/** Worker timings of the run: short, so that leases run out and stalled jobs are taken again within seconds. */
export const WORKER_TIMINGS = {
  leaseTtl: '2s',
  stalledInterval: '1s',
  holdBackoff: '1500ms',
  poll: '250ms',
  heartbeat: '1s',
  shutdownGrace: '2s',
} as const;

export type WorkerState = 'running' | 'stopped' | 'dead';

export interface ManagedWorker {
  readonly slot: number;
  readonly proc: WorkerProcess;
  readonly pid: number;
  /** `host:pid:xxxx` (a lease token is `<workerId>#<fence>`). */
  readonly workerId: string;
  state: WorkerState;
}

export interface ScannedProcess {
  pid: number;
  ppid: number;
  /** /proc state letter: R, S, D, T (stopped), Z… */
  state: string;
  cmdline: string;
  marker: string | null;
  kind: 'worker' | 'agent' | 'tool' | 'other';
}

const exitHooked = { done: false };
const runIds = new Set<string>();
const roots = new Set<string>();

/** SIGKILLs, synchronously, every live process whose environment carries CHAOS_RUN_ID=<id>. */
export function killRunProcessesSync(runId: string): number {
  let killed = 0;
  for (const p of scanRunProcessesSync(runId)) {
    try {
      process.kill(p.pid, 'SIGKILL');
      killed += 1;
    } catch {
      // gone
    }
  }
  return killed;
}

function installExitHook(runId: string): void {
  runIds.add(runId);
  if (exitHooked.done) return;
  exitHooked.done = true;
  process.on('exit', () => {
    // Twice: a worker killed in the first sweep may have spawned an agent just before.
    for (const id of runIds) killRunProcessesSync(id);
    for (const id of runIds) killRunProcessesSync(id);
    for (const root of roots) rmSync(root, { recursive: true, force: true });
  });
}

/** Every live (non-zombie) process of this run, read from /proc (Linux). */
export function scanRunProcessesSync(runId: string, workerPids: ReadonlySet<number> = new Set()): ScannedProcess[] {
  const needle = `\0CHAOS_RUN_ID=${runId}\0`;
  const out: ScannedProcess[] = [];
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return out;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid) continue;
    try {
      const environ = `\0${readFileSync(`/proc/${pid}/environ`, 'latin1')}\0`;
      if (!environ.includes(needle)) continue;
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const state = fields[0] ?? '?';
      if (state === 'Z' || state === 'X') continue;
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
      const markerAt = environ.indexOf(`\0${AGENT_MARKER_ENV}=`);
      const marker =
        markerAt === -1
          ? null
          : environ.slice(markerAt + AGENT_MARKER_ENV.length + 2, environ.indexOf('\0', markerAt + 1));
      const kind: ScannedProcess['kind'] =
        workerPids.has(pid) || /sessiond\.mjs worker/.test(cmdline)
          ? 'worker'
          : marker === null
            ? 'other'
            : /^sleep\b|\/sleep\b/.test(cmdline)
              ? 'tool'
              : 'agent';
      out.push({ pid, ppid: Number(fields[1]), state, cmdline, marker, kind });
    } catch {
      // gone meanwhile, or not ours
    }
  }
  return out;
}

/** An agent of the run, as its marker and the live processes carrying it say. */
export interface AgentRecord {
  marker: string;
  sessionId: string;
  workerPid: number;
  pid: number | null;
}

export interface ClusterOptions {
  log: (line: string) => void;
  /** Worker processes (slots) kept running. */
  workers: number;
  concurrency: number;
  /** 'redis-cluster': a real Redis Cluster (3 masters + 3 replicas, AOF) instead of one redis-server. */
  backend?: 'single' | 'redis-cluster';
  /** SESSIOND_QUEUE_PARTITIONS of the workers and of the run's Runtime. Default 1. */
  queuePartitions?: number;
  /** More environment for the worker processes (SESSIOND_REDIS_WAIT_REPLICAS…). */
  workerEnv?: Record<string, string>;
}

export class Cluster {
  readonly runId = randomBytes(6).toString('hex');
  readonly prefix = uniquePrefix('chaos');
  readonly root = mkdtempSync(join(tmpdir(), 'sessiond-chaos-'));
  readonly stateDir = join(this.root, 'attempts');
  readonly options: ClusterOptions;
  redis!: RedisServer;
  /** The Redis Cluster of a 'redis-cluster' world (then `redis` only has its url and stop()). */
  redisCluster: RedisCluster | null = null;
  model!: FakeModelServer;
  pi!: PiEnv;
  runtime!: Runtime;
  connect!: (role: string) => Redis;
  #closeConnections: () => void = () => undefined;
  readonly workers: ManagedWorker[] = [];
  /** Every worker process ever started (dead ones too), by pid. */
  readonly allWorkers = new Map<number, ManagedWorker>();
  readonly log: (line: string) => void;
  /** More worker env, for the workers started from now on (a scenario's declared `workerEnv`, see run.ts). */
  readonly workerEnv: Record<string, string> = {};
  /** The `workerEnv` each worker was started with (JSON), by pid. */
  readonly #envOf = new Map<number, string>();
  #closed = false;

  private constructor(options: ClusterOptions) {
    this.options = options;
    this.log = options.log;
    installExitHook(this.runId);
    roots.add(this.root);
  }

  static async start(options: ClusterOptions): Promise<Cluster> {
    const cluster = new Cluster(options);
    try {
      await cluster.#start();
    } catch (error) {
      await cluster.close();
      throw error;
    }
    return cluster;
  }

  async #start(): Promise<void> {
    mkdirSync(this.stateDir, { recursive: true });
    const redis =
      this.options.backend === 'redis-cluster'
        ? startRedisCluster({ aof: true }).then((c) => {
            this.redisCluster = c;
            return clusterAsServer(c);
          })
        : startRedis({ aof: true });
    [this.redis, this.model] = await Promise.all([
      redis,
      startFakeModelServer({ scripts: { [PI_SLOW_MODEL]: { text: PI_SLOW_TEXT, chunkDelayMs: 110 } } }),
    ]);
    this.pi = createPiEnv({ serverUrl: this.model.url, extraModels: [PI_SLOW_MODEL], root: join(this.root, 'pi') });
    const { connect, closeAll } = connector(this.redis.url);
    this.connect = connect;
    this.#closeConnections = closeAll;
    this.runtime = new Runtime({
      connect,
      prefix: this.prefix,
      policy: TEST_POLICY,
      queuePartitions: this.options.queuePartitions ?? 1,
    });
    this.log(
      `run ${this.runId}: ${this.redisCluster === null ? 'redis-server' : 'Redis Cluster (3 masters + 3 replicas)'} ${this.redis.url} (AOF, fsync always), fake model server ${this.model.url}, prefix ${this.prefix}, dir ${this.root}`,
    );
    for (let slot = 0; slot < this.options.workers; slot++) mkdirSync(this.#hostDir(slot), { recursive: true });
    // pi's managed agent dir, prepared once per "host" before any attempt runs.
    await Promise.all(
      Array.from({ length: this.options.workers }, (_, slot) =>
        prepareManagedAgentDir(resolve(this.pi.agentDir), join(this.#hostDir(slot), 'state')),
      ),
    );
    await Promise.all(Array.from({ length: this.options.workers }, (_, slot) => this.startWorker(slot)));
  }

  #hostDir(slot: number): string {
    return join(this.root, `host-${slot}`);
  }

  /**
   * Starts a worker process in `slot` (replacing whatever ran there) and waits until it says it started;
   * `redisUrl`: another way to the run's Redis (the partition scenario's proxy).
   */
  async startWorker(slot: number, redisUrl: string = this.redis.url): Promise<ManagedWorker> {
    const host = this.#hostDir(slot);
    const proc = await startWorkerProcess(
      {
        redisUrl,
        prefix: this.prefix,
        env: this.pi,
        stateDir: join(host, 'state'),
        sessionDir: join(host, 'sessions'),
        concurrency: this.options.concurrency,
        leaseTtl: WORKER_TIMINGS.leaseTtl,
        stalledInterval: WORKER_TIMINGS.stalledInterval,
        holdBackoff: WORKER_TIMINGS.holdBackoff,
        poll: WORKER_TIMINGS.poll,
        heartbeat: WORKER_TIMINGS.heartbeat,
        shutdownGrace: WORKER_TIMINGS.shutdownGrace,
        extraEnv: {
          SESSIOND_PI_COMMAND: AGENT_COMMAND,
          CHAOS_REAL_PI: piBin,
          CHAOS_NODE: process.execPath,
          CHAOS_RUN_ID: this.runId,
          CHAOS_STATE_DIR: this.stateDir,
          // The fake agent reads these: named, since an agent's env holds nothing else of the worker's.
          SESSIOND_AGENT_ENV: [
            ...AGENT_ENV_NAMES,
            'CHAOS_REAL_PI',
            'CHAOS_NODE',
            'CHAOS_RUN_ID',
            'CHAOS_STATE_DIR',
            'FAKE_MODEL_URL',
          ].join(','),
          SESSIOND_LOG_LEVEL: 'info',
          // Unsandboxed unless asked: the fake agent counts attempts in CHAOS_STATE_DIR and real pi asks a 127.0.0.1 fake model.
          SESSIOND_SANDBOX: process.env.SESSIOND_SANDBOX ?? 'none',
          // Workspaces on (the default; named so that an outer env cannot turn them off), every "host" sharing one
          // store: a session that moves host restores its files from there, as a fleet must (a store per host fails
          // such attempts `startup`).
          SESSIOND_WORKSPACES_ENABLED: 'true',
          SESSIOND_WORKSPACE_STORE: join(this.root, 'workspace-store.git'),
          ...(this.options.queuePartitions === undefined
            ? {}
            : { SESSIOND_QUEUE_PARTITIONS: String(this.options.queuePartitions) }),
          ...(this.options.workerEnv ?? {}),
          // The one-request agent (test/fixtures/agents/http-pi.sh, for `--model limits-…`) asks here.
          FAKE_MODEL_URL: this.model.url,
          ...this.workerEnv,
        },
      },
      60_000,
    );
    const worker: ManagedWorker = { slot, proc, pid: proc.pid, workerId: proc.workerId, state: 'running' };
    this.#envOf.set(proc.pid, JSON.stringify(this.workerEnv));
    void proc.exited.then(() => {
      worker.state = 'dead';
    });
    this.workers[slot] = worker;
    this.allWorkers.set(worker.pid, worker);
    return worker;
  }

  /** Replaces `workerEnv` (for the workers started from now on; `applyWorkerEnv` restarts the others). */
  setWorkerEnv(env: Readonly<Record<string, string>>): void {
    for (const key of Object.keys(this.workerEnv)) delete this.workerEnv[key];
    Object.assign(this.workerEnv, env);
  }

  /** Restarts (gracefully, all at once) the live workers started with another `workerEnv` than the one now; the number restarted. */
  async applyWorkerEnv(): Promise<number> {
    const want = JSON.stringify(this.workerEnv);
    const stale = this.liveWorkers().filter((w) => this.#envOf.get(w.pid) !== want);
    await Promise.all(stale.map(async (w) => this.terminate(w)));
    await Promise.all(stale.map(async (w) => this.startWorker(w.slot)));
    return stale.length;
  }

  liveWorkers(): ManagedWorker[] {
    return this.workers.filter((w) => w.state !== 'dead');
  }

  /** kill -9; resolves once the process is gone. */
  async kill9(worker: ManagedWorker): Promise<void> {
    if (worker.state === 'stopped') worker.proc.kill('SIGCONT');
    worker.proc.kill('SIGKILL');
    await worker.proc.exited;
    worker.state = 'dead';
  }

  /** SIGTERM (graceful shutdown: running attempts get the shutdown grace, then are stopped and re-queued); SIGKILL after `graceMs`. */
  async terminate(
    worker: ManagedWorker,
    graceMs = 15_000,
  ): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    worker.proc.kill('SIGTERM');
    const timer = setTimeout(() => worker.proc.kill('SIGKILL'), graceMs);
    const exit = await worker.proc.exited;
    clearTimeout(timer);
    worker.state = 'dead';
    return exit;
  }

  sigstop(worker: ManagedWorker): void {
    worker.proc.kill('SIGSTOP');
    worker.state = 'stopped';
  }

  sigcont(worker: ManagedWorker): void {
    worker.proc.kill('SIGCONT');
    worker.state = 'running';
  }

  /** The processes of this run now. */
  processes(): ScannedProcess[] {
    return scanRunProcessesSync(this.runId, new Set(this.allWorkers.keys()));
  }

  /**
   * The agents of this run with a live process, by marker: the marker names the worker that started
   * the agent and its session (nothing about processes is kept in Redis). `pid`: the agent itself
   * (the marked process whose parent is not of its marker), null once only its tools are left.
   */
  async procRecords(processes: readonly ScannedProcess[] = this.processes()): Promise<Map<string, AgentRecord>> {
    const byMarker = new Map<string, ScannedProcess[]>();
    for (const p of processes) if (p.marker !== null) byMarker.set(p.marker, [...(byMarker.get(p.marker) ?? []), p]);
    const out = new Map<string, AgentRecord>();
    for (const [marker, group] of byMarker) {
      const parsed = parseMarker(marker);
      if (parsed === null) continue;
      const pids = new Set(group.map((p) => p.pid));
      const agent = group.find((p) => p.kind === 'agent' && !pids.has(p.ppid));
      out.set(marker, { marker, sessionId: parsed.sessionId, workerPid: parsed.workerPid, pid: agent?.pid ?? null });
    }
    return out;
  }

  /** SIGTERM every live worker (graceful: they give their sessions back), SIGKILL after `graceMs`. */
  async stopWorkers(graceMs = 8000): Promise<void> {
    const live = [...this.allWorkers.values()].filter((w) => w.state !== 'dead');
    for (const w of live) {
      if (w.state === 'stopped') w.proc.kill('SIGCONT');
      w.proc.kill('SIGTERM');
    }
    await Promise.all(
      live.map(async (w) => {
        const timer = setTimeout(() => w.proc.kill('SIGKILL'), graceMs);
        await w.proc.exited;
        clearTimeout(timer);
        w.state = 'dead';
      }),
    );
  }

  /** Stops everything this run started, whatever state it is in. Idempotent; never throws. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.stopWorkers().catch(() => undefined);
    // What the workers left (agents of killed workers, tool grandchildren): reaped, then killed by run id.
    if (this.runtime !== undefined)
      await reapOrphans(markerScope(internals(this.runtime).keys.prefix)).catch(() => undefined);
    killRunProcessesSync(this.runId);
    await this.runtime?.close().catch(() => undefined);
    this.#closeConnections();
    await this.model?.close().catch(() => undefined);
    await this.redis?.stop().catch(() => undefined);
    rmSync(this.root, { recursive: true, force: true });
    roots.delete(this.root);
  }
}
