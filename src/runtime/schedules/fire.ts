import { Worker, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { hasErrorCode } from '../../errors.ts';
import type { DeploymentPolicy } from '../../policy/index.ts';
import { enqueue, type EnqueueHow } from '../caller/enqueue.ts';
import { callerParts, type CallerParts } from '../caller/parts.ts';
import type { Keys } from '../keys.ts';
import type { LifecycleLimits } from '../lifecycle/limits.ts';
import { lifecycleKeys } from '../lifecycle/keys.ts';
import type { LimitRule } from '../limits/match.ts';
import { scheduleFiringField } from '../counters.ts';
import { schedulePromptId } from './prompt-id.ts';
import type { FiringOutcome, ScheduleView } from './spec.ts';
import { FIRE_JOB, SCHEDULE_QUEUE, ScheduleStore, scheduleKeys, scheduleQueue, tickOf } from './store.ts';

export interface ScheduleRunnerOptions {
  connect: (role: string) => Redis;
  keys: Keys;
  /** The worker's deployment policy: each firing is an enqueue checked against it. */
  policy: DeploymentPolicy;
  queuePartitions: number;
  /** The caller's limits a firing's enqueue obeys (maxQueuedPrompts, maxRetention…). */
  callerLimits?: Partial<LifecycleLimits>;
  fleetLimits?: readonly LimitRule[];
  workerId: string;
  /** BullMQ's lock of a firing's job, and its stalled check. */
  lockMs: number;
  stalledIntervalMs: number;
  log: (level: 'info' | 'warn' | 'error', message: string, fields?: Record<string, unknown>) => void;
}

/**
 * Fires the schedules (every worker runs one; any of them takes a given firing). One firing per tick fleet-wide:
 * BullMQ's job scheduler makes one job per tick (its id `repeat:<schedule>:<tick>`, the next one added only by the
 * worker that took this one), and a firing claims its tick in Redis before it enqueues (SET NX), so a job run again
 * after a stall enqueues nothing twice. A worker that dies between the claim and the enqueue loses that tick's
 * prompt: at most once, never twice.
 */
export class ScheduleRunner {
  readonly #options: ScheduleRunnerOptions;
  readonly #redis: Redis;
  readonly #parts: CallerParts;
  readonly #store: ScheduleStore;
  #worker: Worker | null = null;
  #queue: ReturnType<typeof scheduleQueue> | null = null;

  constructor(options: ScheduleRunnerOptions) {
    this.#options = options;
    this.#parts = callerParts({
      connect: options.connect,
      prefix: options.keys.prefix,
      policy: options.policy,
      queuePartitions: options.queuePartitions,
      ...(options.callerLimits === undefined ? {} : { limits: options.callerLimits }),
      ...(options.fleetLimits === undefined ? {} : { fleetLimits: options.fleetLimits }),
    });
    this.#redis = this.#parts.redis;
    this.#store = new ScheduleStore(
      this.#redis,
      options.keys,
      () => (this.#queue ??= scheduleQueue(this.#redis, options.keys)),
    );
  }

  async start(): Promise<void> {
    const worker = new Worker(SCHEDULE_QUEUE, (job) => this.fire(job), {
      connection: this.#options.connect('worker-schedules'),
      prefix: scheduleKeys(this.#options.keys).tag,
      concurrency: 4,
      lockDuration: this.#options.lockMs,
      stalledInterval: this.#options.stalledIntervalMs,
    });
    worker.on('error', (error) => this.#options.log('error', 'schedule queue error', { error: error.message }));
    this.#worker = worker;
    await worker.waitUntilReady();
  }

  /** One firing: the schedule's prompt enqueued as its caller's enqueue would be, the outcome recorded. */
  async fire(job: Job): Promise<string> {
    if (job.name !== FIRE_JOB) return 'ignored: unknown job name';
    const id = (job.data as { scheduleId?: unknown } | null)?.scheduleId;
    if (typeof id !== 'string') return 'ignored: no scheduleId';
    const tick = tickOf(job);
    const found = await this.#store.get(id);
    if (found === null) {
      // Removed while this firing waited: its scheduler goes too, if it is still there.
      await this.#store.unschedule(id);
      return 'ignored: no such schedule';
    }
    if (found.state.status !== 'active') return `ignored: ${found.state.status}`;
    if (!(await this.#store.claimTick(id, tick, this.#options.workerId))) return 'ignored: tick fired already';
    const { def } = found;
    const sessionId = def.sessionId ?? `${def.id}.${tick}`;
    const how: EnqueueHow = {
      promptId: schedulePromptId(def.id, tick),
      ...(def.sessionId !== null ? { mustExist: true } : def.ownerCap === undefined ? {} : { owner: def.ownerCap }),
    };
    let run: NonNullable<ScheduleView['lastRun']>;
    try {
      const { turn } = await enqueue(this.#parts, { ...def.request, sessionId }, how);
      run = { at: Date.now(), tick, outcome: 'enqueued', sessionId, turn };
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      run = { at: Date.now(), tick, outcome: outcomeOf(error), sessionId, error: message };
      if (run.outcome === 'failed')
        this.#options.log('warn', 'a schedule firing failed', { scheduleId: id, tick, error: message });
    }
    await this.#store.recordRun(id, run);
    await this.#redis
      .hincrby(lifecycleKeys(this.#options.keys).counters, scheduleFiringField(run.outcome), 1)
      // Silent: a metric only; the firing is recorded in the schedule's runs either way.
      .catch(() => undefined);
    if (run.outcome === 'session_deleted') {
      // Its session is gone for good: the schedule stops, and stays listed saying why, until removed.
      await this.#store.setState(id, `ended:session_deleted:${run.at}`);
      await this.#store.unschedule(id);
      this.#options.log('info', 'schedule ended: its session was deleted', { scheduleId: id, sessionId });
    }
    return run.outcome;
  }

  async close(): Promise<void> {
    await this.#worker?.close();
    await this.#queue?.close();
    await this.#parts.queue.close();
    // Closing: a connection that cannot say QUIT is gone already.
    await this.#redis.quit().catch(() => undefined);
  }
}

function outcomeOf(error: unknown): FiringOutcome {
  if (hasErrorCode(error, 'not_found')) return 'session_deleted';
  // Being deleted: it will be gone.
  if (hasErrorCode(error, 'conflict') && error.message.includes('being deleted')) return 'session_deleted';
  if (hasErrorCode(error, 'conflict') && (error as { state?: unknown }).state !== undefined) return 'rejected_busy';
  if (hasErrorCode(error, 'invalid_input') || hasErrorCode(error, 'quota_exceeded') || hasErrorCode(error, 'conflict'))
    return 'refused';
  return 'failed';
}
