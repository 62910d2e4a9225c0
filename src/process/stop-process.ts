import type { Writable } from 'node:stream';
import type { AttemptCgroup } from './cgroup.ts';
import { cancelStage } from './cancel-stages.ts';
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
  /**
   * Synchronous: true once the agent's exit proves that no process of its tree is left, so stage 3 needs no
   * sweep by marker, group and parents (see spawn-agent.ts: a bubblewrap sandbox whose bwrap exited by itself).
   */
  treeGone?: () => boolean;
}

/**
 * Three stages: (1) interrupt the agent, (2) wait up to GRACEFUL_STOP_TIMEOUT_MS for it to exit,
 * (3) SIGKILL the whole tree, the agent's survivors included (its cgroup whole first, then what the
 * marker, the group and parent links find), and wait up to KILL_WAIT_TIMEOUT_MS.
 * Stages 1-2 are skipped when the agent has already exited; stage 3 always runs, its sweep (a scan of every
 * process of the host) unless the agent's exit proved its tree gone (`treeGone`): on the path of every cancel.
 * Contract: never throws; runs on its own timers.
 */
export async function stopProcessTree(target: StopTarget): Promise<void> {
  try {
    if (!target.hasExited()) {
      interrupt(target);
      cancelStage(target.marker, 'signalled');
      await within(target.exited, GRACEFUL_STOP_TIMEOUT_MS);
      cancelStage(target.marker, 'exited');
    }
    const deadline = Date.now() + KILL_WAIT_TIMEOUT_MS;
    await target.cgroup?.kill();
    if (target.treeGone?.() === true) {
      cancelStage(target.marker, 'swept');
      return;
    }
    await killProcessTree(target.pid, target.marker, {
      startTime: target.startTime,
      // The agent is the first process of its tree: older processes are not read.
      notBefore: target.startTime,
      timeoutMs: KILL_WAIT_TIMEOUT_MS,
    });
    cancelStage(target.marker, 'swept');
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
