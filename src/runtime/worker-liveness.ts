import { WORKER_DEFAULTS } from '../config/defaults.ts';
import type { WorkerHeartbeat } from './caller/types.ts';

/**
 * How old a worker's heartbeat may be before the worker counts as gone: three heartbeats, at least
 * 5 s. One rule for `/readyz`, the metrics, `GET /api/workers`, `doctor` and the CLI's follow.
 */
export function workerStaleMs(heartbeatMs: number = WORKER_DEFAULTS.heartbeatMs): number {
  return Math.max(5000, 3 * heartbeatMs);
}

/** The worker sent a heartbeat within `staleMs` of `now`. */
export function isLive(worker: Pick<WorkerHeartbeat, 'lastSeen'>, now: number, staleMs: number): boolean {
  return now - worker.lastSeen <= staleMs;
}

/**
 * The worker takes sessions of `agent`. A heartbeat naming no agents (a worker older than that
 * field) is taken to offer them all. The dashboard's session page applies the same rule in the browser.
 */
export function offersAgent(worker: Pick<WorkerHeartbeat, 'agents'>, agent: string): boolean {
  return worker.agents === undefined || worker.agents.includes(agent);
}
