import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Redis } from 'ioredis';
import { findProcessesByMarker, isAlive, killProcessTree, processStartTime } from '../process/index.ts';
import type { Keys } from './keys.ts';

/** HSET only when the field is still there. KEYS: hash. ARGV: field, value. */
const SET_IF_PRESENT = `if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end return 0`;

/** What a worker records about each agent process it runs, per host, before and after spawning it. */
export interface ProcessRecord {
  marker: string;
  sessionId: string;
  workerId: string;
  workerPid: number;
  workerStartTime: string | null;
  pid: number | null;
  startTime: string | null;
  at: number;
}

export function hostKey(): string {
  return hostname().replace(/[^A-Za-z0-9_.-]/g, '_') || 'localhost';
}

export function newMarker(): string {
  return `sessiond-${randomUUID()}`;
}

/**
 * The agent processes of this host, recorded in Redis so that a worker that
 * starts after another one died can find and kill what it left behind. A
 * marker is recorded before the spawn (the process inherits it in its
 * environment), the pid and its start time right after.
 */
export class ProcessRegistry {
  readonly #redis: Redis;
  readonly #key: string;
  readonly #workerId: string;
  #workerStartTime: string | null | undefined;
  /** The records of this worker's agents that are not done yet. */
  readonly #records = new Map<string, ProcessRecord>();

  constructor(redis: Redis, keys: Keys, workerId: string) {
    this.#redis = redis;
    this.#key = keys.procs(hostKey());
    this.#workerId = workerId;
  }

  async #selfStartTime(): Promise<string | null> {
    if (this.#workerStartTime === undefined) this.#workerStartTime = await processStartTime(process.pid);
    return this.#workerStartTime;
  }

  async record(marker: string, sessionId: string): Promise<void> {
    const record: ProcessRecord = { marker, sessionId, workerId: this.#workerId, workerPid: process.pid, workerStartTime: await this.#selfStartTime(), pid: null, startTime: null, at: Date.now() };
    this.#records.set(marker, record);
    await this.#redis.hset(this.#key, marker, JSON.stringify(record));
  }

  /**
   * Adds the pid to the record, unless `done` removed it meanwhile (an agent that ended at once):
   * a read-then-write here would put the record back after `done`, for good.
   */
  async spawned(marker: string, pid: number, startTime: string | null): Promise<void> {
    const record = this.#records.get(marker);
    if (record === undefined) return;
    await this.#redis.eval(SET_IF_PRESENT, 1, this.#key, marker, JSON.stringify({ ...record, pid, startTime }));
  }

  async done(marker: string): Promise<void> {
    this.#records.delete(marker);
    await this.#redis.hdel(this.#key, marker);
  }
}

/**
 * Kills the agent processes that workers of this host left behind when they
 * died: records whose worker process is gone. A pid is killed only if its start
 * time is the recorded one (never a recycled pid); processes carrying the
 * marker are found and killed too. Returns how many records were reaped.
 */
export async function reapOrphans(redis: Redis, keys: Keys): Promise<{ reaped: number; killed: number }> {
  const key = keys.procs(hostKey());
  const records = await redis.hgetall(key);
  let reaped = 0;
  let killed = 0;
  for (const [marker, raw] of Object.entries(records)) {
    let record: ProcessRecord;
    try {
      record = JSON.parse(raw) as ProcessRecord;
    } catch {
      await redis.hdel(key, marker);
      continue;
    }
    const workerAlive = record.workerStartTime === null ? await isAlive(record.workerPid) : await isAlive(record.workerPid, record.workerStartTime);
    if (workerAlive) continue;
    const before = await findProcessesByMarker(marker);
    if (record.pid !== null && record.startTime !== null && (await isAlive(record.pid, record.startTime))) {
      await killProcessTree(record.pid, marker, { startTime: record.startTime });
    } else if (before.length > 0 && before[0] !== undefined) {
      await killProcessTree(before[0].pid, marker, { startTime: before[0].startTime });
    }
    killed += before.length;
    await redis.hdel(key, marker);
    reaped += 1;
  }
  return { reaped, killed };
}
