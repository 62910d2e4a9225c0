import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Containment of an attempt's processes in a cgroup of its own (Linux, cgroup v2), killed whole at
 * the attempt's end (`cgroup.kill`): a tool's `cmd &`, a double fork, or a process that left the
 * marker, the process group and the session (`setsid env -i …`) stay in the cgroup all the same.
 * Optional ceilings per attempt: `pids.max` (a fork bomb stays contained) and the memory limit,
 * from cgroup v2 when its controllers can be enabled there, else from a cgroup v1 hierarchy of that
 * controller. Where no cgroup2 mount is writable, `detectContainment()` says why and attempts are
 * contained by the marker/group/parent sweep alone (process-tree.ts).
 */

export interface AttemptLimits {
  /** `pids.max` of the attempt's cgroup; 0 or undefined: no ceiling. */
  pidsMax?: number;
  /** Memory ceiling in bytes (`memory.max`, v1 `memory.limit_in_bytes`); 0 or undefined: none. */
  memoryMaxBytes?: number;
}

export interface ContainmentInfo {
  mode: 'cgroup' | 'sweep';
  /** Where the attempts' cgroups are made, or why there are none. */
  detail: string;
  /** The ceilings this host can apply. */
  limits: Array<'pids' | 'memory'>;
}

/** One v1 hierarchy that supplies a controller v2 lacks here. */
interface V1Hierarchy {
  controller: 'pids' | 'memory';
  base: string;
  own: string;
  file: string;
}

interface Host {
  base: string;
  own: string;
  hasKill: boolean;
  v2Limits: Set<'pids' | 'memory'>;
  v1: V1Hierarchy[];
}

const CGROUP_DIR = 'sessiond';
const EMPTY_WAIT_MS = 5000;
const POLL_MS = 20;

let detected: { info: ContainmentInfo; host: Host | null } | undefined;

/** How this host contains attempts; detected once per process. Never throws. */
export function detectContainment(): ContainmentInfo {
  detected ??= detect();
  return detected.info;
}

function host(): Host | null {
  detected ??= detect();
  return detected.host;
}

interface Mount {
  dir: string;
  type: string;
  options: string[];
}

function mounts(): Mount[] {
  try {
    return readFileSync('/proc/self/mounts', 'utf8')
      .split('\n')
      .map((line) => line.split(' '))
      .filter((f) => f.length >= 4)
      .map((f) => ({ dir: unescapeMount(f[1] ?? ''), type: f[2] ?? '', options: (f[3] ?? '').split(',') }));
  } catch {
    // No readable mount table: no cgroup v2 mount (containment falls back to the sweep, and says so).
    return [];
  }
}

function unescapeMount(text: string): string {
  return text.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

/** This process's cgroup paths: '' for v2, else by v1 controller. */
function ownPaths(): Map<string, string> {
  const out = new Map<string, string>();
  try {
    for (const line of readFileSync('/proc/self/cgroup', 'utf8').split('\n')) {
      const m = /^\d+:([^:]*):(.*)$/.exec(line);
      if (m === null) continue;
      for (const controller of (m[1] ?? '').split(',')) out.set(controller, m[2] ?? '/');
    }
  } catch {
    // not Linux
  }
  return out;
}

function detect(): { info: ContainmentInfo; host: Host | null } {
  const sweep = (why: string) => ({
    info: {
      mode: 'sweep' as const,
      detail: `no cgroup containment: ${why}; processes are found by marker, process group and parent links`,
      limits: [],
    },
    host: null,
  });
  if (process.platform !== 'linux') return sweep(`${process.platform} has no cgroups`);
  const all = mounts();
  const v2 = all.find((m) => m.type === 'cgroup2');
  if (v2 === undefined) return sweep('no cgroup2 mount');
  const paths = ownPaths();
  const own = join(v2.dir, paths.get('') ?? '/');
  const base = join(own, CGROUP_DIR);
  const problem = probe(base, own);
  if (problem !== null) return sweep(`${base}: ${problem}`);
  const v2Limits = new Set<'pids' | 'memory'>();
  for (const controller of ['pids', 'memory'] as const) if (enable(own, base, controller)) v2Limits.add(controller);
  const v1: V1Hierarchy[] = [];
  for (const controller of ['pids', 'memory'] as const) {
    if (v2Limits.has(controller)) continue;
    const mount = all.find((m) => m.type === 'cgroup' && m.options.includes(controller));
    const path = paths.get(controller);
    if (mount === undefined || path === undefined) continue;
    const ownV1 = join(mount.dir, path);
    const baseV1 = join(ownV1, CGROUP_DIR);
    if (probe(baseV1, ownV1) === null)
      v1.push({
        controller,
        base: baseV1,
        own: ownV1,
        file: controller === 'pids' ? 'pids.max' : 'memory.limit_in_bytes',
      });
  }
  const hasKill = existsSync(join(base, 'cgroup.kill'));
  const limits = [...v2Limits, ...v1.map((h) => h.controller)];
  const from =
    v1.length === 0 ? '' : `; ${v1.map((h) => `${h.controller} ceiling from cgroup v1 ${h.base}`).join(', ')}`;
  return {
    info: {
      mode: 'cgroup',
      detail: `a cgroup v2 per attempt under ${base} (${hasKill ? 'cgroup.kill' : 'freeze + kill'})${from}`,
      limits,
    },
    host: { base, own, hasKill, v2Limits, v1 },
  };
}

/** Can this process make a cgroup under `base` and move itself in and back? null when it can. */
function probe(base: string, own: string): string | null {
  const dir = join(base, `probe-${process.pid}`);
  try {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'cgroup.procs'), String(process.pid));
    writeFileSync(join(own, 'cgroup.procs'), String(process.pid));
    return null;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code ?? (error as Error).message;
  } finally {
    try {
      rmdirSync(dir);
    } catch {
      // never made
    }
  }
}

/** Enables a v2 controller for the attempts' cgroups; false where the kernel or the delegation forbids it. */
function enable(own: string, base: string, controller: string): boolean {
  try {
    const available = readFileSync(join(own, 'cgroup.controllers'), 'utf8').split(/\s+/);
    if (!available.includes(controller)) return false;
    for (const dir of [own, base]) {
      if (!readFileSync(join(dir, 'cgroup.subtree_control'), 'utf8').split(/\s+/).includes(controller))
        writeFileSync(join(dir, 'cgroup.subtree_control'), `+${controller}`);
    }
    return true;
  } catch {
    // Not writable: the caller reports cgroups unusable.
    return false;
  }
}

/**
 * The cgroup(s) of one attempt. Contract: `enter` runs a synchronous spawn with this process moved
 * into the attempt's cgroups, so the child starts inside them (no race with its first fork);
 * `kill()` never throws and resolves once the cgroups are empty and removed, or the wait ran out;
 * it also kills the processes that moved from an attempt's cgroup to sessiond's own (killEscapees).
 */
export interface AttemptCgroup {
  readonly path: string;
  enter<T>(spawn: () => T): T;
  kill(): Promise<{ remaining: number }>;
}

/** A cgroup for the attempt named `name` (the agent's marker), or null on a host without cgroup containment. */
export function createAttemptCgroup(name: string, limits: AttemptLimits = {}): AttemptCgroup | null {
  const h = host();
  if (h === null) return null;
  const dirs: Array<{ dir: string; own: string }> = [
    { dir: join(h.base, name), own: h.own },
    ...h.v1.map((v) => ({ dir: join(v.base, name), own: v.own })),
  ];
  try {
    for (const { dir } of dirs) mkdirSync(dir);
  } catch {
    // The caller reports the failure; this only removes what was made.
    for (const { dir } of dirs) removeQuietly(dir);
    return null;
  }
  const v2Dir = join(h.base, name);
  const limitFile = (controller: 'pids' | 'memory'): string | undefined => {
    if (h.v2Limits.has(controller)) return join(v2Dir, controller === 'pids' ? 'pids.max' : 'memory.max');
    const v1 = h.v1.find((v) => v.controller === controller);
    return v1 === undefined ? undefined : join(v1.base, name, v1.file);
  };
  const ceilings: Array<{ file: string; value: number }> = [];
  for (const [controller, value] of [
    ['pids', limits.pidsMax],
    ['memory', limits.memoryMaxBytes],
  ] as const) {
    const file = limitFile(controller);
    if (value !== undefined && value > 0 && file !== undefined) ceilings.push({ file, value });
  }
  let killed: Promise<{ remaining: number }> | null = null;
  return {
    path: v2Dir,
    enter(spawn) {
      const entered: string[] = [];
      try {
        for (const { dir } of dirs) {
          writeFileSync(join(dir, 'cgroup.procs'), String(process.pid));
          entered.push(dir);
        }
      } catch {
        // Not contained by this cgroup after all: the sweep by marker still runs at the end.
      }
      try {
        return spawn();
      } finally {
        for (const { dir, own } of dirs)
          if (entered.includes(dir)) writeQuietly(join(own, 'cgroup.procs'), String(process.pid));
        // Ceilings after this process left: its own threads must not count against pids.max.
        for (const c of ceilings) writeQuietly(c.file, String(c.value));
      }
    },
    kill() {
      // What left this cgroup for sessiond's own goes too (see killEscapees).
      killed ??= killDirs(
        dirs.map((d) => d.dir),
        h.hasKill,
      ).then((result) => {
        killEscapees();
        return result;
      });
      return killed;
    },
  };
}

/** Names of the attempt cgroups on this host (a dead worker's included); [] without cgroup containment. */
export function listAttemptCgroups(): string[] {
  const h = host();
  if (h === null) return [];
  try {
    return readdirSync(h.base, { withFileTypes: true })
      .filter((e) => e.isDirectory() && !e.name.startsWith('probe-'))
      .map((e) => e.name);
  } catch {
    // A cgroup already gone has no children.
    return [];
  }
}

/**
 * Kills every process sitting in sessiond's own cgroup (the parent of the attempts' cgroups), where
 * none belongs: a tool that wrote its pid there left its attempt's cgroup (possible only without a
 * sandbox, see sandbox/). Run by each attempt cgroup's kill() and at worker start. Never throws;
 * returns how many it signalled.
 */
export function killEscapees(): number {
  const h = host();
  if (h === null) return 0;
  const pids = listed(h.base).filter((pid) => pid !== process.pid);
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  return pids.length;
}

/** Kills and removes the attempt cgroup `name` of this host (orphan reaping). Never throws. */
export async function killAttemptCgroup(name: string): Promise<{ remaining: number }> {
  const h = host();
  if (h === null || name.includes('/') || name === '.' || name === '..') return { remaining: 0 };
  return killDirs([join(h.base, name), ...h.v1.map((v) => join(v.base, name))], h.hasKill);
}

async function killDirs(dirs: string[], hasKill: boolean): Promise<{ remaining: number }> {
  const [v2, ...v1] = dirs;
  const deadline = Date.now() + EMPTY_WAIT_MS;
  let remaining = 0;
  for (;;) {
    if (v2 !== undefined && hasKill) writeQuietly(join(v2, 'cgroup.kill'), '1');
    else if (v2 !== undefined) {
      writeQuietly(join(v2, 'cgroup.freeze'), '1');
      killListed(v2);
    }
    for (const dir of v1) killListed(dir);
    remaining = dirs.reduce((n, dir) => n + listed(dir).length, 0);
    if (remaining === 0 || Date.now() >= deadline) break;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  if (remaining === 0) for (const dir of [...v1, ...(v2 === undefined ? [] : [v2])]) removeQuietly(dir);
  return { remaining };
}

function listed(dir: string): number[] {
  try {
    return readFileSync(join(dir, 'cgroup.procs'), 'utf8')
      .split('\n')
      .filter((line) => /^\d+$/.test(line))
      .map(Number);
  } catch {
    // A cgroup already gone holds no process.
    return [];
  }
}

function killListed(dir: string): void {
  for (const pid of listed(dir)) {
    if (pid === process.pid) continue;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
}

function writeQuietly(file: string, value: string): void {
  try {
    writeFileSync(file, value);
  } catch {
    // the cgroup is gone or the file does not exist on this kernel
  }
}

function removeQuietly(dir: string): void {
  try {
    rmdirSync(dir);
  } catch {
    // gone already, or still populated (reported by kill())
  }
}
