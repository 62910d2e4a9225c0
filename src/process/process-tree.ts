import { access, readdir, readFile } from 'node:fs/promises';
import { constants as fsConstants, readFileSync } from 'node:fs';
import path from 'node:path';
import treeKill from 'tree-kill';

/** Env variable that tags an agent and, by inheritance, every process it starts. */
export const AGENT_MARKER_ENV = 'SESSIOND_AGENT_MARKER';
export const DEFAULT_TREE_KILL_WAIT_MS = 5000;
const SWEEP_INTERVAL_MS = 50;
const TREE_KILL_TIMEOUT_MS = 1000;
const HAS_PROC = process.platform === 'linux';

export interface TrackedProcess {
  pid: number;
  /** Field 22 of /proc/<pid>/stat: with the pid, names one process for the life of the machine. */
  startTime: string;
}

interface ProcStat extends TrackedProcess {
  ppid: number;
  pgrp: number;
  state: string;
}

/** /proc/<pid>/stat, or null when there is no such (readable) process. */
async function readStat(pid: number): Promise<ProcStat | null> {
  let text: string;
  try {
    text = await readFile(`/proc/${pid}/stat`, 'utf8');
  } catch {
    // The process is gone (or not ours to read): no stat.
    return null;
  }
  return parseStat(pid, text);
}

/**
 * readStat without the thread pool: a scan reads one stat per process on the host, and the thread-pool
 * round trips of each file (open, fstat, read, close) made a scan of ~160 processes take 20-120 ms on a
 * busy 2-core host, on the path of every cancel. The kernel builds this file from the task itself (no
 * wait on the process's memory, unlike `environ`), so reading it on the event loop costs the syscalls only.
 */
function readStatSync(pid: number): ProcStat | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    // The process is gone (or not ours to read): no stat.
    return null;
  }
  return parseStat(pid, text);
}

function parseStat(pid: number, text: string): ProcStat | null {
  // comm (field 2) may hold spaces and parentheses: the fields after it start after the last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const [state, ppid, pgrp] = fields;
  const startTime = fields[19];
  if (state === undefined || ppid === undefined || pgrp === undefined || startTime === undefined) return null;
  return { pid, ppid: Number(ppid), pgrp: Number(pgrp), state, startTime };
}

function isDead(stat: ProcStat): boolean {
  return stat.state === 'Z' || stat.state === 'X';
}

/** Start time of a live process (Linux), or null when it is gone, a zombie, or /proc is missing. */
export async function processStartTime(pid: number): Promise<string | null> {
  if (!HAS_PROC) return null;
  const stat = await readStat(pid);
  return stat === null || isDead(stat) ? null : stat.startTime;
}

/**
 * Whether `pid` is a live process (zombies count as dead: they are only waiting to be reaped).
 * With `startTime`, whether it is still that same process and not a later one with a recycled pid.
 */
export async function isAlive(pid: number, startTime?: string): Promise<boolean> {
  if (!HAS_PROC) {
    try {
      process.kill(pid, 0);
      return true;
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === 'EPERM';
    }
  }
  const stat = await readStat(pid);
  if (stat === null || isDead(stat)) return false;
  return startTime === undefined || stat.startTime === startTime;
}

const MARKER_ENTRY = Buffer.from(`\0${AGENT_MARKER_ENV}=`);

/** The value of SESSIOND_AGENT_MARKER in the process's environment, or null (none, gone, or another user's). */
async function markerOf(pid: number): Promise<string | null> {
  let environ: Buffer;
  try {
    environ = Buffer.concat([Buffer.from([0]), await readFile(`/proc/${pid}/environ`), Buffer.from([0])]);
  } catch {
    // The process is gone (or not ours to read): no marker.
    return null;
  }
  const at = environ.indexOf(MARKER_ENTRY);
  if (at === -1) return null;
  const start = at + MARKER_ENTRY.length;
  return environ.subarray(start, environ.indexOf(0, start)).toString('utf8');
}

interface ScannedProcess extends ProcStat {
  /** Its SESSIOND_AGENT_MARKER, or null. */
  marker: string | null;
  marked: boolean;
}

/** Stats read on the event loop between two yields to it (see readStatSync). */
const STAT_CHUNK = 128;

/**
 * Every live process but this one, with its marker and whether it is `marker`. Empty without /proc.
 * `notBefore` (a start time, see TrackedProcess): processes started earlier are listed with no marker
 * read (null): they cannot carry a marker made for a process started at `notBefore`, nor descend from it.
 */
async function scanProcesses(marker: string | null, notBefore: string | null = null): Promise<ScannedProcess[]> {
  if (!HAS_PROC) return [];
  let entries: string[];
  try {
    entries = await readdir('/proc');
  } catch {
    // No /proc: no process to find.
    return [];
  }
  const pids = entries
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((pid) => pid !== process.pid);
  const stats: ProcStat[] = [];
  for (let i = 0; i < pids.length; i += STAT_CHUNK) {
    if (i > 0) await new Promise<void>((resolve) => setImmediate(resolve));
    for (const pid of pids.slice(i, i + STAT_CHUNK)) {
      const stat = readStatSync(pid);
      if (stat !== null && !isDead(stat)) stats.push(stat);
    }
  }
  const since = notBefore === null ? null : BigInt(notBefore);
  // Environments stay on the thread pool: reading one waits on the process's memory map, which a
  // process stuck in a page fault holds.
  const scanned = await Promise.all(
    stats.map(async (stat): Promise<ScannedProcess | null> => {
      if (since !== null && BigInt(stat.startTime) < since) return { ...stat, marker: null, marked: false };
      const value = await markerOf(stat.pid);
      return { ...stat, marker: value, marked: marker !== null && value === marker };
    }),
  );
  return scanned.filter((p): p is ScannedProcess => p !== null);
}

/**
 * Live processes whose environment carries `SESSIOND_AGENT_MARKER=<marker>` (Linux; [] elsewhere),
 * with their parents. Finds descendants whatever their parent, process group or session.
 */
export async function findProcessesByMarker(marker: string): Promise<Array<TrackedProcess & { ppid: number }>> {
  const scanned = await scanProcesses(marker);
  return scanned.filter((p) => p.marked).map(({ pid, ppid, startTime }) => ({ pid, ppid, startTime }));
}

/** A live process carrying an agent marker. */
export interface MarkedProcess extends TrackedProcess {
  ppid: number;
  marker: string;
}

/** Every live process (but this one) that carries SESSIOND_AGENT_MARKER, with its value (Linux; [] elsewhere). */
export async function findMarkedProcesses(): Promise<MarkedProcess[]> {
  const scanned = await scanProcesses(null);
  return scanned.flatMap(({ pid, ppid, startTime, marker }) =>
    marker === null ? [] : [{ pid, ppid, startTime, marker }],
  );
}

export interface KillTreeOptions {
  /** Start time of `pid` when it was spawned; without it the root must carry the marker to be killed. */
  startTime?: string | null;
  /** How long to keep killing and waiting until every process is gone; default 5 s. */
  timeoutMs?: number;
  /**
   * The start time of the tree's first process (its spawner knows it: the agent it started with `marker`). Processes
   * started before it are neither marked nor descendants, and their environments are not read. Unset: every one is.
   */
  notBefore?: string | null;
}

export interface KillTreeResult {
  /** Processes still alive when the wait ran out; empty on success. */
  remaining: TrackedProcess[];
}

/**
 * SIGKILLs the tree of agent `pid`: the agent, its live descendants (tree-kill, and parentage read from
 * /proc), its process group, every process carrying `marker` (whatever its parent, group or session)
 * and the descendants of those. Repeats until none is left or `timeoutMs` ran out.
 *
 * Contract: never throws; never kills a process that merely reuses a pid (start times are compared; the
 * root is trusted only when its start time matches `options.startTime` or it carries the marker).
 * Usable on a tree whose owner died (orphan reaping): pass the pid, marker and start time found in /proc (see runtime/orphans.ts).
 */
export async function killProcessTree(
  pid: number,
  marker: string,
  options: KillTreeOptions = {},
): Promise<KillTreeResult> {
  const deadline = Date.now() + (options.timeoutMs ?? DEFAULT_TREE_KILL_WAIT_MS);
  let first = true;
  for (;;) {
    const targets = await findTargets(pid, marker, options.startTime ?? null, options.notBefore ?? null);
    if (first && targets.rootIsLive) await treeKillQuietly(pid);
    first = false;
    if (targets.killGroup) signal(-pid);
    await Promise.all(targets.processes.map(killIfSame));
    if (targets.processes.length === 0) return { remaining: [] };
    if (Date.now() >= deadline) {
      const left = await Promise.all(
        targets.processes.map(async (p) => ((await isAlive(p.pid, p.startTime)) ? p : null)),
      );
      return {
        remaining: left
          .filter((p): p is ProcStat => p !== null)
          .map(({ pid: id, startTime }) => ({ pid: id, startTime })),
      };
    }
    await delay(SWEEP_INTERVAL_MS);
  }
}

interface Targets {
  processes: ProcStat[];
  rootIsLive: boolean;
  killGroup: boolean;
}

async function findTargets(
  rootPid: number,
  marker: string,
  rootStartTime: string | null,
  notBefore: string | null,
): Promise<Targets> {
  if (!HAS_PROC) {
    // Without /proc only the live tree and the group can be reached.
    const rootIsLive = await isAlive(rootPid);
    return { processes: [], rootIsLive, killGroup: rootIsLive };
  }
  const all = await scanProcesses(marker, notBefore);
  const root = all.find((p) => p.pid === rootPid);
  const rootIsLive = root !== undefined && (rootStartTime === null ? root.marked : root.startTime === rootStartTime);
  const group = all.filter((p) => p.pgrp === rootPid);
  // A pgid is never reused while the group has a member: one member of ours makes the whole group ours.
  const killGroup = rootIsLive || group.some((p) => p.marked);
  const chosen = new Map<number, ProcStat>();
  for (const p of all) if (p.marked) chosen.set(p.pid, p);
  if (rootIsLive && root !== undefined) chosen.set(root.pid, root);
  if (killGroup) for (const p of group) chosen.set(p.pid, p);
  // Descendants that dropped the marker from their env are still children of chosen processes.
  const children = new Map<number, ProcStat[]>();
  for (const p of all) {
    const siblings = children.get(p.ppid);
    if (siblings === undefined) children.set(p.ppid, [p]);
    else siblings.push(p);
  }
  const queue = [...chosen.values()];
  for (let p = queue.pop(); p !== undefined; p = queue.pop()) {
    for (const child of children.get(p.pid) ?? []) {
      if (chosen.has(child.pid)) continue;
      chosen.set(child.pid, child);
      queue.push(child);
    }
  }
  return { processes: [...chosen.values()], rootIsLive, killGroup };
}

async function killIfSame(target: TrackedProcess): Promise<void> {
  if (await isAlive(target.pid, target.startTime)) signal(target.pid);
}

function signal(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // ESRCH: already gone; EPERM: not ours to kill.
  }
}

/** tree-kill walks the live parent -> child tree with `ps`; skipped when `ps` is missing (it would throw). */
async function treeKillQuietly(pid: number): Promise<void> {
  if (!(await hasPs())) return;
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, TREE_KILL_TIMEOUT_MS);
    try {
      treeKill(pid, 'SIGKILL', () => {
        clearTimeout(timer);
        resolve();
      });
    } catch {
      // tree-kill could not start: the kill of the marked processes that follows still covers the tree.
      clearTimeout(timer);
      resolve();
    }
  });
}

let psAvailable: Promise<boolean> | undefined;

function hasPs(): Promise<boolean> {
  if (process.platform === 'win32') return Promise.resolve(true);
  psAvailable ??= (async () => {
    const name = process.platform === 'darwin' ? 'pgrep' : 'ps';
    for (const dir of (process.env.PATH ?? '').split(path.delimiter).filter(Boolean)) {
      try {
        await access(path.join(dir, name), fsConstants.X_OK);
        return true;
      } catch {
        // not in this directory
      }
    }
    return false;
  })();
  return psAvailable;
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
