import { performance } from 'node:perf_hooks';
import { Runtime } from '../../src/runtime/runtime.ts';
import { BenchFailure } from './benchmark.ts';
import { pool, procCpuMs, verifySessions, withTimeout, type Cleanup, type Deadline } from './harness.ts';
import { WorkerProcess, type WorkerProcessOptions } from './worker-process.ts';
import { connector } from './worker.ts';
import { internals } from '../../src/runtime/internals.ts';

/**
 * K real worker processes on one prefix of one Redis, and a Runtime in this
 * process to enqueue with: the whole of sessiond as an operator runs it.
 * `run(ids)` enqueues one prompt per session (PRODUCER_IN_FLIGHT calls in
 * flight) and waits until every one was released by a worker, timed from the
 * first enqueue to the last release; `verify(ids)` then checks what Redis
 * holds.
 */
export const PRODUCER_IN_FLIGHT = 16;
export const PROMPT = 'Summarize the session store in one paragraph.';

export interface FleetOptions extends Omit<WorkerProcessOptions, 'onReleased'> {
  workers: number;
}

export interface FleetRun {
  n: number;
  wallMs: number;
  perSec: number;
  /** CPU per session in µs: the worker processes, the agent processes they started (reaped children), redis-server, this process (the producer). */
  cpuUs: { workers: number; agents: number; redis: number; producer: number };
}

export class Fleet {
  readonly runtime: Runtime;
  readonly workers: WorkerProcess[] = [];
  readonly #released = new Set<string>();
  readonly #waiters = new Set<() => void>();
  readonly #options: FleetOptions;
  readonly #redisPid: number;
  readonly #deadline: Deadline;
  readonly close: () => Promise<void>;

  private constructor(options: FleetOptions, redisPid: number, cleanup: Cleanup, deadline: Deadline) {
    this.#options = options;
    this.#redisPid = redisPid;
    this.#deadline = deadline;
    const { connect, closeAll } = connector(options.url);
    this.runtime = new Runtime({ connect, prefix: options.prefix });
    this.close = cleanup.add(`fleet ${options.prefix}`, async () => {
      await Promise.all(this.workers.map((w) => w.stop()));
      await this.runtime.close().catch(() => undefined);
      closeAll();
    });
  }

  static async start(options: FleetOptions, redisPid: number, cleanup: Cleanup, deadline: Deadline): Promise<Fleet> {
    const fleet = new Fleet(options, redisPid, cleanup, deadline);
    await internals(fleet.runtime).redis.ping();
    await internals(fleet.runtime).queue.queue.waitUntilReady();
    const started = await Promise.all(
      Array.from({ length: options.workers }, () =>
        WorkerProcess.start(
          {
            ...options,
            startTimeoutMs: deadline.cap(options.startTimeoutMs ?? 60_000),
            onReleased: (sessionId, outcome) => {
              if (outcome !== 'released') return;
              fleet.#released.add(sessionId);
              for (const wake of fleet.#waiters) wake();
            },
          },
          cleanup,
        ),
      ),
    );
    fleet.workers.push(...started);
    return fleet;
  }

  get pids(): number[] {
    return this.workers.map((w) => w.pid);
  }

  /** Resolves once every session of `ids` was released. */
  waitReleased(ids: readonly string[], timeoutMs: number): Promise<void> {
    const missing = (): number => ids.reduce((n, id) => n + (this.#released.has(id) ? 0 : 1), 0);
    if (missing() === 0) return Promise.resolve();
    let wake: () => void = () => undefined;
    const done = new Promise<void>((resolve) => {
      wake = () => {
        if (missing() === 0) resolve();
      };
      this.#waiters.add(wake);
    });
    return withTimeout(
      done,
      this.#deadline.cap(timeoutMs),
      () => `${ids.length} sessions released on ${this.#options.prefix} (${ids.length - missing()} so far)`,
    ).finally(() => this.#waiters.delete(wake));
  }

  /** Enqueues one prompt for each of `ids` and waits until all were released; timed from the first enqueue to the last release. */
  async run(ids: readonly string[], timeoutMs: number): Promise<FleetRun> {
    const cpu = this.#cpu();
    const self = process.cpuUsage();
    const start = performance.now();
    await pool(ids, PRODUCER_IN_FLIGHT, (sessionId) => this.runtime.enqueue({ sessionId, prompt: PROMPT }));
    await this.waitReleased(ids, timeoutMs);
    const wallMs = performance.now() - start;
    const used = this.#cpu();
    const producer = process.cpuUsage(self);
    const n = ids.length;
    const perItem = (ms: number): number => (ms * 1000) / n;
    this.#checkWorkers();
    return {
      n,
      wallMs,
      perSec: n / (wallMs / 1000),
      cpuUs: {
        workers: perItem(used.workers - cpu.workers),
        agents: perItem(used.agents - cpu.agents),
        redis: perItem(used.redis - cpu.redis),
        producer: (producer.user + producer.system) / n,
      },
    };
  }

  #cpu(): { workers: number; agents: number; redis: number } {
    let workers = 0;
    let agents = 0;
    for (const pid of this.pids) {
      const c = procCpuMs(pid);
      workers += c.ownMs;
      agents += c.childrenMs;
    }
    return { workers, agents, redis: procCpuMs(this.#redisPid).ownMs };
  }

  #checkWorkers(): void {
    for (const w of this.workers) {
      if (!w.alive) throw new BenchFailure(`worker ${w.pid} died`);
      if (w.problems.length > 0)
        throw new BenchFailure(`worker ${w.pid} reported problems:\n  ${w.problems.slice(0, 5).join('\n  ')}`);
    }
  }

  /**
   * Every session of `ids` completed, its log exactly `messages` long (XLEN);
   * a few read back in full: seq 1..messages, one turn, one attempt,
   * session.started, assistant deltas, terminal.completed.
   */
  async verify(ids: readonly string[], messages: number): Promise<void> {
    await verifySessions(this.runtime, ids, messages);
  }
}

export function sessionIds(n: number, tag: string): string[] {
  return Array.from({ length: n }, (_, i) => `${tag}-${i}`);
}
