import { spawnSync } from 'node:child_process';
import { helperBinary } from './helper-binary.ts';
import { BWRAP_ISOLATION, HELPER_PATH } from './launch.ts';
import { systemBinds } from './system-paths.ts';
import type { SandboxInfo, SandboxMode, SandboxSetting } from './types.ts';

const SETTINGS: readonly SandboxSetting[] = ['auto', 'bwrap', 'landlock', 'none'];

export const LANDLOCK_GAPS = [
  'no PID, network or mount namespace: TCP is confined by port number (the bridges), not by host, and Unix sockets reachable by path (a Redis socket) are not blocked',
  'paths outside what it may read can still be seen to exist (stat), though not read or listed',
  '.git/config and .git/hooks inside the workspace stay writable (Landlock cannot narrow a writable tree)',
  'nested user namespaces are not blocked (they give no way out of the Landlock domain)',
];
export const NONE_GAPS = [
  "no isolation: the agent reads every other process's /proc/<pid>/environ, cmdline and memory as the worker's user",
  'it can move itself out of its cgroup (the orphan sweep kills it at the end of the attempt and at worker start)',
  "it reads and writes whatever the worker's user can, and reaches Redis and sessiond's HTTP API",
];

let detected: SandboxInfo | undefined;

/** This host's sandbox, from `SESSIOND_SANDBOX` (default 'auto') and a probe, once per process. Never throws. */
export function detectSandbox(env: NodeJS.ProcessEnv = process.env): SandboxInfo {
  detected ??= decide(env.SESSIOND_SANDBOX);
  return detected;
}

/** Forgets the decision (tests that force a mode). */
export function resetSandboxDetection(): void {
  detected = undefined;
}

/** Whether `mode` works on this host: null when it does, else why not. Probes each once. */
export function probeMode(mode: SandboxMode): string | null {
  if (mode === 'none') return null;
  // Not `??=`: a probe that passed is null, and must not run again (a bwrap probe is a blocking spawnSync).
  let problem = probes.get(mode);
  if (problem === undefined) {
    problem = mode === 'bwrap' ? probeBwrap() : probeLandlock();
    probes.set(mode, problem);
  }
  return problem;
}

const probes = new Map<SandboxMode, string | null>();

function decide(raw: string | undefined): SandboxInfo {
  const value = raw === undefined || raw === '' ? 'auto' : raw;
  if (!(SETTINGS as readonly string[]).includes(value)) {
    const reason = `SESSIOND_SANDBOX=${JSON.stringify(value)} is not one of ${SETTINGS.join(', ')}`;
    return { requested: 'auto', mode: 'none', detail: reason, gaps: NONE_GAPS, refused: reason };
  }
  const requested = value as SandboxSetting;
  if (requested !== 'auto') {
    const problem = probeMode(requested);
    if (problem === null) return info(requested, requested, `SESSIOND_SANDBOX=${requested}`);
    const reason = `SESSIOND_SANDBOX=${requested}, but ${problem}`;
    return { requested, mode: requested, detail: reason, gaps: gapsOf(requested), refused: reason };
  }
  const why: string[] = [];
  for (const mode of ['bwrap', 'landlock'] as const) {
    const problem = probeMode(mode);
    if (problem === null)
      return info(requested, mode, why.length === 0 ? 'auto: bubblewrap works here' : `auto: ${why.join('; ')}`);
    why.push(`${mode}: ${problem}`);
  }
  return info(requested, 'none', `auto: no sandbox on this host (${why.join('; ')})`);
}

function info(requested: SandboxSetting, mode: SandboxMode, detail: string): SandboxInfo {
  return { requested, mode, detail, gaps: gapsOf(mode), refused: null };
}

export function gapsOf(mode: SandboxMode): string[] {
  return mode === 'bwrap' ? [] : mode === 'landlock' ? LANDLOCK_GAPS : NONE_GAPS;
}

function probeBwrap(): string | null {
  const helper = helperBinary();
  if (!helper.ok) return helper.reason;
  const args = [
    ...BWRAP_ISOLATION,
    ...systemBinds().flat(),
    '--proc',
    '/proc',
    '--dev',
    '/dev',
    '--ro-bind',
    helper.path,
    HELPER_PATH,
    HELPER_PATH,
    'init',
    '--',
    HELPER_PATH,
    'landlock-abi',
  ];
  const run = spawnSync('bwrap', args, { encoding: 'utf8', timeout: 10_000, stdio: ['ignore', 'pipe', 'pipe'] });
  if (run.error !== undefined)
    return (run.error as NodeJS.ErrnoException).code === 'ENOENT'
      ? 'bwrap is not installed (apt-get install bubblewrap)'
      : `bwrap: ${run.error.message}`;
  if (run.status !== 0)
    return `bwrap cannot make a sandbox here: ${(run.stderr || `exit ${String(run.status)}`).trim().split('\n')[0] ?? ''}`;
  return null;
}

function probeLandlock(): string | null {
  if (process.platform !== 'linux') return `${process.platform} has no Landlock`;
  const helper = helperBinary();
  if (!helper.ok) return helper.reason;
  const run = spawnSync(helper.path, ['landlock-abi'], { encoding: 'utf8', timeout: 10_000 });
  const abi = Number(run.stdout?.trim());
  if (run.status !== 0 || !Number.isInteger(abi)) return 'the Landlock probe failed';
  if (abi < 4)
    return abi === 0
      ? 'the kernel has no Landlock (or it is disabled)'
      : `the kernel's Landlock ABI is ${abi} (4 is needed to confine TCP)`;
  return null;
}
