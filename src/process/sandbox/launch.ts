import { existsSync, lstatSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { helperBinary } from './helper-binary.ts';
import { openHostBridges } from './host-bridges.ts';
import { commandPaths, systemBinds, systemPaths } from './system-paths.ts';
import type { Bridge, SandboxFiles, SandboxMode } from './types.ts';

/** The agent's process as sessiond would start it without a sandbox. */
export interface LaunchInput {
  /** An absolute path (resolved on the host's PATH). */
  command: string;
  args: readonly string[];
  env: Record<string, string>;
  cwd?: string;
}

/** How to start the agent in its sandbox. */
export interface Launch {
  mode: SandboxMode;
  command: string;
  args: string[];
  env: Record<string, string>;
  cwd?: string;
  /** bwrap: fd 3 carries bubblewrap's info (the init's host pid), fd 4 the agent's exit status. */
  statusPipes: boolean;
  /** Removes the attempt's private dirs and closes its host bridges. Never throws. */
  close(): Promise<void>;
}

/** The agent's HOME inside a bwrap sandbox (a directory of its own tmpfs root). */
export const SANDBOX_HOME = '/home/agent';
/** Where the helper sits inside a bwrap sandbox. */
export const HELPER_PATH = '/.sessiond/helper';
/**
 * The namespaces and limits of every bwrap sandbox (an attempt's, and detect.ts's probe, which must
 * test exactly what an attempt will ask for).
 */
export const BWRAP_ISOLATION: readonly string[] = [
  '--unshare-user',
  '--unshare-ipc',
  '--unshare-pid',
  '--unshare-net',
  '--unshare-uts',
  '--unshare-cgroup',
  '--disable-userns',
  '--cap-drop',
  'ALL',
  '--die-with-parent',
  '--as-pid-1',
];
/** Ports of the bridges inside a bwrap sandbox (its own network namespace: nothing else listens there). */
const FIRST_BRIDGE_PORT = 18_080;

export interface PreparedBridges {
  urls: Record<string, string>;
  build(input: LaunchInput): Launch;
  /** Closes the bridges when `build` is never called. Never throws. */
  close(): Promise<void>;
}

/**
 * Opens the attempt's bridges for `mode` and returns their URLs, then builds the launch from the
 * agent's final argv and env. Rejects when a bridge or the helper is unavailable (the caller refuses the attempt).
 */
export async function prepareLaunch(
  mode: SandboxMode,
  files: SandboxFiles,
  bridges: ReadonlyArray<Bridge>,
): Promise<PreparedBridges> {
  const names = new Set<string>();
  for (const b of bridges) {
    if (names.has(b.name)) throw new Error(`bridge ${JSON.stringify(b.name)} is named twice`);
    names.add(b.name);
    if (!b.socket.startsWith('/'))
      throw new Error(`bridge ${JSON.stringify(b.name)}: socket ${JSON.stringify(b.socket)} is not an absolute path`);
  }
  if (mode === 'bwrap') {
    const urls: Record<string, string> = {};
    bridges.forEach((b, i) => (urls[b.name] = `http://127.0.0.1:${FIRST_BRIDGE_PORT + i}`));
    return { urls, build: (input) => bwrapLaunch(input, files, bridges), close: () => Promise.resolve() };
  }
  const host = await openHostBridges(bridges);
  if (mode === 'none')
    return {
      urls: host.urls,
      build: (input) => ({ mode, ...input, args: [...input.args], statusPipes: false, close: host.close }),
      close: host.close,
    };
  return {
    urls: host.urls,
    close: host.close,
    build: (input) => {
      try {
        return landlockLaunch(input, files, host.ports, host.close);
      } catch (error) {
        void host.close();
        throw error;
      }
    },
  };
}

function helper(): string {
  const built = helperBinary();
  if (!built.ok) throw new Error(built.reason);
  return built.path;
}

/** The paths of `paths` that exist (a missing one is simply not shown). */
function existing(paths: readonly string[]): string[] {
  return paths.filter((p) => existsSync(p));
}

function ensureDirs(paths: readonly string[]): string[] {
  for (const path of paths) mkdirSync(path, { recursive: true });
  return [...paths];
}

interface Bind {
  kind: '--ro-bind' | '--bind';
  path: string;
}

function bwrapLaunch(input: LaunchInput, files: SandboxFiles, bridges: ReadonlyArray<Bridge>): Launch {
  const helperPath = helper();
  const writable = ensureDirs(files.writable ?? []);
  const cwd = input.cwd;
  const binds = new Map<string, Bind>();
  for (const path of [...commandPaths(input.command), ...existing(files.readOnly ?? [])])
    binds.set(path, { kind: '--ro-bind', path });
  for (const path of [...writable, ...(cwd === undefined ? [] : [cwd])]) binds.set(path, { kind: '--bind', path });
  // Parents before children: a bind inside another must come after it.
  const ordered = [...binds.values()].sort((a, b) => a.path.split('/').length - b.path.split('/').length);
  const protectedPaths = cwd === undefined ? [] : protectedGitPaths(cwd);
  const underEtc = [...ordered.map((b) => b.path), ...protectedPaths].some(
    (p) => p === '/etc' || p.startsWith('/etc/'),
  );
  const args = [
    ...BWRAP_ISOLATION,
    '--hostname',
    'sandbox',
    '--info-fd',
    '3',
    ...systemBinds({ etcView: !underEtc }).flat(),
    '--proc',
    '/proc',
    '--dev',
    '/dev',
    '--tmpfs',
    '/tmp',
    '--dir',
    SANDBOX_HOME,
    '--ro-bind',
    helperPath,
    HELPER_PATH,
    ...bridges.flatMap((b, i) => ['--ro-bind', b.socket, `/.sessiond/bridge-${i}`]),
    ...ordered.flatMap((b) => [b.kind, b.path, b.path]),
    ...protectedPaths.flatMap((p) => ['--ro-bind', p, p]),
    '--chdir',
    cwd ?? SANDBOX_HOME,
    HELPER_PATH,
    'init',
    '--status-fd',
    '4',
    ...bridges.flatMap((_, i) => ['--bridge', String(FIRST_BRIDGE_PORT + i), `/.sessiond/bridge-${i}`]),
    '--',
    input.command,
    ...input.args,
  ];
  return {
    mode: 'bwrap',
    command: 'bwrap',
    args,
    env: privateEnv(input.env, SANDBOX_HOME, '/tmp'),
    statusPipes: true,
    close: () => Promise.resolve(),
  };
}

/** `.git/config` and `.git/hooks` of the workspace, re-bound read-only (hooks made first, so none can be added). */
function protectedGitPaths(cwd: string): string[] {
  const git = join(cwd, '.git');
  try {
    if (!lstatSync(git).isDirectory()) return [];
    mkdirSync(join(git, 'hooks'), { recursive: true });
  } catch {
    // No .git (ENOENT): nothing to protect; hooks we cannot make (EACCES), the agent (same user) cannot either.
    return [];
  }
  return [join(git, 'config'), join(git, 'hooks')].filter((p) => existsSync(p));
}

/** The agent's env with a private HOME and TMPDIR; XDG dirs (the worker's) dropped. */
function privateEnv(env: Record<string, string>, home: string, tmp: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) if (!name.startsWith('XDG_')) out[name] = value;
  return { ...out, HOME: home, TMPDIR: tmp };
}

/**
 * What of /proc a Landlock agent reads besides its own /proc/<pid>: the host-wide figures runtimes
 * ask for. Not other processes' dirs: Landlock's ptrace rule did not keep their environ readable-proof
 * on every kernel (measured), so they are simply not readable.
 */
const PROC_GLOBALS = [
  '/proc/cpuinfo',
  '/proc/meminfo',
  '/proc/stat',
  '/proc/loadavg',
  '/proc/uptime',
  '/proc/version',
  '/proc/filesystems',
  '/proc/sys/kernel',
  '/proc/sys/vm',
];

function landlockLaunch(
  input: LaunchInput,
  files: SandboxFiles,
  ports: number[],
  closeBridges: () => Promise<void>,
): Launch {
  const helperPath = helper();
  const root = mkdtempSync(join(tmpdir(), 'sessiond-attempt-'));
  const home = join(root, 'home');
  const tmp = join(root, 'tmp');
  ensureDirs([home, tmp]);
  const writable = [...ensureDirs(files.writable ?? []), home, tmp, ...(input.cwd === undefined ? [] : [input.cwd])];
  const readOnly = [
    ...systemPaths(),
    ...PROC_GLOBALS,
    ...commandPaths(input.command),
    ...existing(files.readOnly ?? []),
  ];
  const args = [
    'landlock',
    ...readOnly.flatMap((p) => ['--ro', p]),
    '--dev',
    '/dev',
    '--proc-self',
    ...writable.flatMap((p) => ['--rw', p]),
    ...ports.flatMap((p) => ['--port', String(p)]),
    '--',
    input.command,
    ...input.args,
  ];
  return {
    mode: 'landlock',
    command: helperPath,
    args,
    env: privateEnv(input.env, home, tmp),
    cwd: input.cwd ?? home,
    statusPipes: false,
    close: async () => {
      await closeBridges();
      rmSync(root, { recursive: true, force: true });
    },
  };
}
