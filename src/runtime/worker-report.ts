import { hostname } from 'node:os';
import type { ContainmentInfo, SandboxInfo } from '../process/index.ts';
import type { WorkerOptions } from './worker-options.ts';

/** Said once at start: how the worker keeps an attempt's processes from outliving it, and what its sandbox cannot stop. */
export function announceIsolation(
  log: NonNullable<WorkerOptions['log']>,
  containment: ContainmentInfo,
  sandbox: SandboxInfo,
): void {
  // Said once: how this worker keeps the processes of an attempt from outliving it.
  if (containment.mode === 'sweep')
    log('warn', 'attempts are not contained by cgroups on this host', { containment: containment.detail });
  else log('info', 'attempts contained by cgroups', { containment: containment.detail });
  // Said once, plainly: what this worker's sandbox cannot stop (docs/sandbox.md).
  if (sandbox.refused !== null)
    log('error', 'every attempt will be refused: the sandbox asked for is unavailable', { sandbox: sandbox.refused });
  else if (sandbox.mode === 'bwrap') log('info', 'attempts run sandboxed (bwrap)', { sandbox: sandbox.detail });
  // A warning when auto found less than bwrap; the operator's explicit choice is only stated.
  else
    log(
      sandbox.requested === 'auto' ? 'warn' : 'info',
      `attempts run with sandbox mode ${sandbox.mode}, which does not stop everything`,
      {
        sandbox: sandbox.detail,
        gaps: sandbox.gaps,
      },
    );
}

/** The worker's entry in the workers hash (JSON), written at each heartbeat. */
export function workerRecord(
  worker: {
    id: string;
    active: number;
    concurrency: number;
    partitions: readonly number[];
    agents: readonly string[];
  },
  containment: ContainmentInfo,
  sandbox: SandboxInfo,
): string {
  return JSON.stringify({
    id: worker.id,
    host: hostname(),
    pid: process.pid,
    lastSeen: Date.now(),
    active: worker.active,
    concurrency: worker.concurrency,
    partitions: worker.partitions,
    agents: worker.agents,
    containment: { mode: containment.mode, detail: containment.detail },
    sandbox: {
      mode: sandbox.mode,
      detail: sandbox.refused ?? sandbox.detail,
      gaps: sandbox.gaps,
      refused: sandbox.refused !== null,
    },
  });
}
