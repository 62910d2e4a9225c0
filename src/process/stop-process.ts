import type { Writable } from 'node:stream';
import type { AttemptCgroup } from './cgroup.ts';
import { killProcessTree } from './process-tree.ts';

/** Stage 2: how long the agent gets to exit after the interrupt. */
export const GRACEFUL_STOP_TIMEOUT_MS = 2000;
/** Stage 3: how long to keep SIGKILLing the tree and waiting until every process of it is gone. */
export const KILL_WAIT_TIMEOUT_MS = 5000;

const CTRL_C = '\u0003';

export interface StopTarget {
  pid: number;
  /** Who gets the stage-1 signal: default `pid`; in a bwrap sandbox its init, which passes it on to the agent. */
  interruptPid?: number;
  marker: string;
  startTime: string | null;
  interruptSignal: NodeJS.Signals;
  /** The agent's stdin when it is a pipe: stage 1 also types Ctrl-C there. */
  stdin: Writable | null;
  /** Synchronous: true once the agent was reaped (its pid may then belong to another process). */
  hasExited(): boolean;
  exited: Promise<unknown>;
  /** The attempt's cgroup, killed whole in stage 3 (null on a host without cgroup containment). */
  cgroup?: AttemptCgroup | null;
}

/**
 * Three stages: (1) interrupt the agent, (2) wait up to GRACEFUL_STOP_TIMEOUT_MS for it to exit,
 * (3) SIGKILL the whole tree, the agent's survivors included (its cgroup whole first, then what the
 * marker, the group and parent links find), and wait up to KILL_WAIT_TIMEOUT_MS.
 * Stages 1-2 are skipped when the agent has already exited; stage 3 always runs.
 * Contract: never throws; runs on its own timers.
 */
export async function stopProcessTree(target: StopTarget): Promise<void> {
  try {
    if (!target.hasExited()) {
      interrupt(target);
      await within(target.exited, GRACEFUL_STOP_TIMEOUT_MS);
    }
    const deadline = Date.now() + KILL_WAIT_TIMEOUT_MS;
    await target.cgroup?.kill();
    await killProcessTree(target.pid, target.marker, {
      startTime: target.startTime,
      timeoutMs: KILL_WAIT_TIMEOUT_MS,
    });
    await within(target.exited, Math.max(0, deadline - Date.now()));
  } catch {
    // Stop never throws: what could not be killed is left to orphan reaping by marker.
  }
}

function interrupt(target: StopTarget): void {
  try {
    process.kill(target.interruptPid ?? target.pid, target.interruptSignal);
  } catch {
    // ESRCH: it is exiting already.
  }
  const stdin = target.stdin;
  if (stdin !== null && stdin.writable) stdin.write(CTRL_C, () => undefined);
}

/** Resolves when `promise` settles or after `ms`, whichever comes first. */
async function within(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      promise.then(
        () => undefined,
        // Only waits for the end: how the process ended is reported by its owner.
        () => undefined,
      ),
      new Promise<void>((resolve) => (timer = setTimeout(resolve, ms))),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
