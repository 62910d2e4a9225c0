import { createHash, randomUUID } from 'node:crypto';
import {
  findMarkedProcesses,
  isAlive,
  killAttemptCgroup,
  killProcessTree,
  listAttemptCgroups,
  processStartTime,
  type TrackedProcess,
} from '../process/index.ts';
import { SESSION_ID_PATTERN } from './keys.ts';

/**
 * Agent processes are found on their host by the marker in their environment
 * (SESSIOND_AGENT_MARKER, inherited by everything they start), and the marker
 * names who started them:
 * `sessiond.<scope>.<worker pid>.<worker start time>.<uuid>.<session id>`, the scope
 * standing for the deployment (its key prefix). So a worker that starts after
 * another one of its deployment died finds what the dead one left behind by
 * reading /proc alone: nothing about processes is kept in Redis.
 */
const MARKER = /^sessiond\.([0-9a-f]{8})\.(\d+)\.(\d+)\.([0-9a-f-]{36})\.(.+)$/;

/** The deployment part of a marker: 8 hex digits of a hash of the key prefix. */
export function markerScope(prefix: string): string {
  return createHash('sha256').update(prefix).digest('hex').slice(0, 8);
}

/** The worker process that starts an agent: its pid and start time (`/proc/<pid>/stat` field 22; '0' where unknown). */
export interface MarkerOwner {
  pid: number;
  startTime: string;
}

let self: Promise<MarkerOwner> | undefined;

/** This process, as the markers of the agents it starts name it. */
export function markerOwner(): Promise<MarkerOwner> {
  self ??= processStartTime(process.pid).then((startTime) => ({ pid: process.pid, startTime: startTime ?? '0' }));
  return self;
}

export function newMarker(owner: MarkerOwner, scope: string, sessionId: string): string {
  return `sessiond.${scope}.${owner.pid}.${owner.startTime}.${randomUUID()}.${sessionId}`;
}

export interface ParsedMarker {
  scope: string;
  workerPid: number;
  workerStartTime: string;
  sessionId: string;
}

/** What a marker says about its agent; null for a marker sessiond did not make this way. */
export function parseMarker(marker: string): ParsedMarker | null {
  const m = MARKER.exec(marker);
  // The session id is checked as keys.ts checks it, so that both always agree on what an id is.
  if (m === null || !SESSION_ID_PATTERN.test(m[5] ?? '')) return null;
  return { scope: m[1] ?? '', workerPid: Number(m[2]), workerStartTime: m[3] ?? '0', sessionId: m[5] ?? '' };
}

/** One agent's live processes on this host, by marker. */
export interface AgentProcesses extends ParsedMarker {
  marker: string;
  /** The agent itself (the marked process whose parent is not of the same marker), if it is alive. */
  agent: TrackedProcess | null;
  processes: TrackedProcess[];
}

/** Every agent of this host that has a live process, grouped by marker (Linux: /proc; [] elsewhere). */
export async function findAgentProcesses(): Promise<AgentProcesses[]> {
  const byMarker = new Map<string, AgentProcesses>();
  const marked = await findMarkedProcesses();
  const pidsOf = new Map<string, Set<number>>();
  for (const p of marked) {
    const parsed = parseMarker(p.marker);
    if (parsed === null) continue;
    let group = byMarker.get(p.marker);
    if (group === undefined) {
      group = { ...parsed, marker: p.marker, agent: null, processes: [] };
      byMarker.set(p.marker, group);
      pidsOf.set(p.marker, new Set());
    }
    group.processes.push({ pid: p.pid, startTime: p.startTime });
    pidsOf.get(p.marker)?.add(p.pid);
  }
  for (const p of marked) {
    const group = byMarker.get(p.marker);
    if (group !== undefined && group.agent === null && !(pidsOf.get(p.marker)?.has(p.ppid) ?? false))
      group.agent = { pid: p.pid, startTime: p.startTime };
  }
  return [...byMarker.values()];
}

/**
 * Kills the agent processes that workers of this host and deployment (`scope`)
 * left behind when they died: agents whose worker (pid and start time, from the
 * marker) is gone, with their whole trees, and the attempt cgroups (named by
 * marker) of those workers, with every process in them, those that left the
 * marker included. Returns how many agents were reaped and how many processes
 * they had (as found by marker).
 */
export async function reapOrphans(scope: string): Promise<{ reaped: number; killed: number }> {
  let reaped = 0;
  let killed = 0;
  const ownerIsDead = async (marker: ParsedMarker): Promise<boolean> =>
    !(await (marker.workerStartTime === '0'
      ? isAlive(marker.workerPid)
      : isAlive(marker.workerPid, marker.workerStartTime)));
  for (const group of await findAgentProcesses()) {
    if (group.scope !== scope || !(await ownerIsDead(group))) continue;
    const root = group.agent ?? group.processes[0];
    if (root === undefined) continue;
    await killProcessTree(root.pid, group.marker, { startTime: root.startTime });
    killed += group.processes.length;
    reaped += 1;
  }
  for (const name of listAttemptCgroups()) {
    const parsed = parseMarker(name);
    if (parsed === null || parsed.scope !== scope || !(await ownerIsDead(parsed))) continue;
    await killAttemptCgroup(name);
  }
  return { reaped, killed };
}

/**
 * Runs `task` for callers that each need a run that *started after their call* (one under way may have
 * looked before what its caller knows happened): with none under way it starts one; a caller that comes
 * while one runs shares the next, started once that one ends. A burst of N callers costs at most two runs.
 */
export function freshRuns<T>(task: () => Promise<T>): () => Promise<T> {
  let running: Promise<T> | null = null;
  let next: Promise<T> | null = null;
  const start = (): Promise<T> => {
    const run: Promise<T> = task().finally(() => {
      if (running === run) running = null;
    });
    running = run;
    return run;
  };
  const ended = (): void => undefined;
  return () => {
    if (running === null) return start();
    // Its outcome is its own callers'; this one only waits for it to end.
    next ??= running.then(ended, ended).then(() => {
      next = null;
      return start();
    });
    return next;
  };
}

/**
 * Self-fencing (see SessionWorker): kills at once, with SIGKILL, every process of the agents this
 * process started for `sessionId` (found by marker, so the tools they started too) and their attempt
 * cgroups (with what left the marker). No grace: it runs when this worker can no longer prove it holds
 * the session, and must be done before anyone else may take it. Returns how many processes it signalled.
 */
export async function killOwnAgents(scope: string, sessionId: string): Promise<number> {
  const owner = await markerOwner();
  const mine = (m: ParsedMarker): boolean =>
    m.scope === scope &&
    m.sessionId === sessionId &&
    m.workerPid === owner.pid &&
    (owner.startTime === '0' || m.workerStartTime === owner.startTime);
  let signalled = 0;
  const groups = (await findAgentProcesses()).filter(mine);
  for (const group of groups)
    for (const p of group.processes) {
      // The start time is compared first: never a recycled pid.
      if (!(await isAlive(p.pid, p.startTime))) continue;
      try {
        process.kill(p.pid, 'SIGKILL');
        signalled += 1;
      } catch {
        // ESRCH: it ended meanwhile.
      }
    }
  const cgroups = listAttemptCgroups().filter((name) => {
    const parsed = parseMarker(name);
    return parsed !== null && mine(parsed);
  });
  await Promise.all(cgroups.map((name) => killAttemptCgroup(name)));
  // What started between the scan and the kills (a tool forking): the usual tree kill, marker-checked.
  await Promise.all(
    groups.map((g) => {
      const root = g.agent ?? g.processes[0];
      return root === undefined ? undefined : killProcessTree(root.pid, g.marker, { startTime: root.startTime });
    }),
  );
  return signalled;
}
