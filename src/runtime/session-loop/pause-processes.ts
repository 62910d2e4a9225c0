import { stat } from 'node:fs/promises';
import { findProcessesByMarker } from '../../process/index.ts';
import { helperBinary, type SandboxMode } from '../../process/sandbox/index.ts';

/** The agent's own process as spawned (what `onSpawn` reports): the root of the attempt's tree. */
export interface SpawnedAgent {
  pid: number;
  startTime: string | null;
  sandbox: SandboxMode;
}

/** A live process of the attempt, as found by its marker. */
export interface AttemptProcess {
  pid: number;
  ppid: number;
  startTime: string;
  /** Its executable is sessiond's sandbox helper (the sandbox's init, its bridge server, a bridge's relay). */
  helper: boolean;
}

export interface Paused {
  /** Continues the processes (SIGCONT, once). */
  resume: () => void;
  /**
   * Every process found was the agent's own (onlyAgentAlive): no tool, and nothing a tool left
   * running, was alive while they were held. False when not known (no spawn report, no /proc).
   */
  agentOnly: boolean;
}

/**
 * Stops (SIGSTOP) every live process of an attempt (those carrying its marker) until `resume`
 * continues them (SIGCONT, once): what they do cannot change while sessiond reads their files. A
 * process that ends meanwhile is skipped. If the worker dies before continuing them, its successor
 * on this host kills them as orphans (src/runtime/orphans.ts). With the agent's spawn report, also
 * says whether only the agent's own processes were alive (onlyAgentAlive).
 */
export async function pauseProcesses(marker: string, agent: SpawnedAgent | null = null): Promise<Paused> {
  const stopped: number[] = [];
  const found = await findProcessesByMarker(marker);
  for (const { pid } of found) {
    try {
      process.kill(pid, 'SIGSTOP');
      stopped.push(pid);
    } catch {
      // Ended between the scan and the signal: nothing to hold.
    }
  }
  let agentOnly = false;
  if (agent !== null && found.length > 0) {
    const helper = agent.sandbox === 'bwrap' ? await helperIdentity() : null;
    const processes = await Promise.all(
      found.map(async (p) => ({ ...p, helper: helper !== null && (await identity(`/proc/${p.pid}/exe`)) === helper })),
    );
    agentOnly = onlyAgentAlive(processes, agent);
  }
  return {
    resume: () => {
      for (const pid of stopped.splice(0)) {
        try {
          process.kill(pid, 'SIGCONT');
        } catch {
          // Ended meanwhile (killed by a stop): nothing to continue.
        }
      }
    },
    agentOnly,
  };
}

/**
 * Whether the live processes of an attempt are only the agent's own: no tool (or anything a tool
 * started, escaped or not) among them. Any doubt answers false. The agent's own are:
 * - without a bwrap sandbox (none, landlock: the helper execs the agent), the spawned process alone;
 * - in a bwrap sandbox, bwrap (the spawned process), processes running sessiond's helper (the
 *   sandbox's init, its bridge server and a bridge's per-connection relays, which run nothing else),
 *   and the agent, the one non-helper child of the init (a child of bwrap). A tool is the agent's
 *   descendant, and one that escaped (its parent gone) becomes the init's child: both are seen.
 * A process carrying the marker but none of these is a tool's: its effects may go on after any
 * snapshot. Pure: the caller reads the processes (pauseProcesses).
 */
export function onlyAgentAlive(processes: readonly AttemptProcess[], agent: SpawnedAgent): boolean {
  const root = processes.find((p) => p.pid === agent.pid);
  if (root === undefined || agent.startTime === null || root.startTime !== agent.startTime) return false;
  const others = processes.filter((p) => p !== root);
  if (agent.sandbox !== 'bwrap') return others.length === 0;
  const byPid = new Map(processes.map((p) => [p.pid, p]));
  const inits = others.filter((p) => p.helper && p.ppid === root.pid);
  if (inits.length !== 1) return false;
  const own = others.filter((p) => !p.helper);
  // The agent: the init's one non-helper child. Anything else not a helper (a tool, an escaped one) is not the agent's own.
  if (own.length > 1) return false;
  const [child] = own;
  if (child !== undefined && byPid.get(child.ppid) !== inits[0]) return false;
  // A helper running in the tree other than below the init (a tool can run the helper's binary too) is a tool's.
  return others.every((p) => !p.helper || p === inits[0] || helperBelow(p, inits[0], byPid));
}

/** Is `p` a descendant of `init` through helper processes only (the bridge server, its relays)? */
function helperBelow(
  p: AttemptProcess,
  init: AttemptProcess | undefined,
  byPid: ReadonlyMap<number, AttemptProcess>,
): boolean {
  for (let parent = byPid.get(p.ppid); parent !== undefined; parent = byPid.get(parent.ppid)) {
    if (parent === init) return true;
    if (!parent.helper) return false;
  }
  return false;
}

/** `device:inode` of a file (following links: /proc/<pid>/exe is the running executable), or null. */
async function identity(path: string): Promise<string | null> {
  try {
    const info = await stat(path);
    return `${info.dev}:${info.ino}`;
  } catch {
    // Gone, or not ours to read: not the helper.
    return null;
  }
}

let helperFile: Promise<string | null> | undefined;

/** The identity of this host's sandbox helper binary (bwrap binds it into the sandbox: the same file). */
function helperIdentity(): Promise<string | null> {
  helperFile ??= (async () => {
    const helper = helperBinary();
    return helper.ok ? identity(helper.path) : null;
  })();
  return helperFile;
}
