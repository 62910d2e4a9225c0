import { constants } from 'node:fs';
import { access } from 'node:fs/promises';
import { constants as osConstants } from 'node:os';
import { delimiter, join } from 'node:path';
import type { Readable } from 'node:stream';
import { describeSpawnError } from '../spawn-error.ts';
import type { SpawnSpec } from '../types.ts';
import { detectSandbox, probeMode } from './detect.ts';
import { prepareLaunch, type Launch } from './launch.ts';
import type { SandboxMode } from './types.ts';

export type { Launch } from './launch.ts';

export type Planned = { ok: true; launch: Launch } | { ok: false; error: string; code?: string };

/** Why an attempt is refused by its sandbox: `code` of the spawn failure. */
export const SANDBOX_REFUSED = 'ESANDBOX';

/**
 * How `spec` is started: as it is (no sandbox asked for, no bridges), or in its sandbox with its
 * bridges open and `finalize` applied. Contract: never throws; a sandbox that cannot be had (the mode
 * is unavailable, the policy requires one and the host has none, a bridge cannot open, `finalize`
 * throws) is `{ ok: false }` with a message saying which.
 */
export async function planLaunch(spec: SpawnSpec): Promise<Planned> {
  if (spec.sandbox === undefined && spec.bridges === undefined && spec.finalize === undefined) {
    return {
      ok: true,
      launch: {
        mode: 'none',
        command: spec.command,
        args: [...spec.args],
        env: spec.env,
        ...cwdOf(spec),
        statusPipes: false,
        close: () => Promise.resolve(),
      },
    };
  }
  const refuse = (why: string): Planned => ({
    ok: false,
    error: `command ${JSON.stringify(spec.command)} was not started: ${why}`,
    code: SANDBOX_REFUSED,
  });
  let mode: SandboxMode = 'none';
  if (spec.sandbox !== undefined) {
    const host = detectSandbox();
    if (spec.sandbox.mode !== undefined) {
      mode = spec.sandbox.mode;
      const problem = probeMode(mode);
      if (problem !== null) return refuse(`the ${mode} sandbox is unavailable: ${problem}`);
    } else {
      if (host.refused !== null) return refuse(host.refused);
      mode = host.mode;
    }
    if (spec.sandbox.required === true && mode === 'none')
      return refuse(
        `the deployment policy requires a sandbox (policy.sandbox.required) and this host has none (${host.detail})`,
      );
  }
  let command = spec.command;
  if (mode !== 'none') {
    const found = await onPath(spec.command, spec.env.PATH);
    if (found === null)
      return { ok: false, error: describeSpawnError(spec.command, 'ENOENT', 'not found'), code: 'ENOENT' };
    command = found;
  }
  let prepared;
  try {
    prepared = await prepareLaunch(mode, spec.sandbox ?? {}, spec.bridges ?? []);
  } catch (error) {
    return refuse(`its sandbox could not be prepared: ${(error as Error).message}`);
  }
  try {
    const final = spec.finalize === undefined ? {} : await spec.finalize(prepared.urls);
    const launch = prepared.build({
      command,
      args: final.args ?? spec.args,
      env: final.env ?? spec.env,
      ...cwdOf(spec),
    });
    return { ok: true, launch };
  } catch (error) {
    await prepared.close();
    return refuse((error as Error).message);
  }
}

function cwdOf(spec: SpawnSpec): { cwd?: string } {
  return spec.cwd === undefined ? {} : { cwd: spec.cwd };
}

/** `command` as an executable path: itself when it holds a '/', else the first match on PATH. */
async function onPath(command: string, path: string | undefined): Promise<string | null> {
  const candidates = command.includes('/')
    ? [command]
    : (path ?? '')
        .split(delimiter)
        .filter((d) => d !== '')
        .map((d) => join(d, command));
  for (const candidate of candidates) {
    try {
      await access(candidate, constants.X_OK);
      return candidate.startsWith('/') ? candidate : join(process.cwd(), candidate);
    } catch {
      // not here
    }
  }
  return null;
}

const INIT_PID_WAIT_MS = 5000;

/** The host pid of the sandbox's init, from bubblewrap's info (fd 3); null when bubblewrap failed before. */
export function readInitPid(stream: Readable | null | undefined): Promise<number | null> {
  return new Promise((resolve) => {
    if (stream === null || stream === undefined) return resolve(null);
    let text = '';
    const timer = setTimeout(() => finish(null), INIT_PID_WAIT_MS);
    const finish = (pid: number | null): void => {
      clearTimeout(timer);
      stream.removeAllListeners('data');
      stream.resume();
      resolve(pid);
    };
    stream.on('error', () => finish(null));
    stream.on('end', () => finish(parsePid(text)));
    stream.on('data', (chunk: Buffer) => {
      text += chunk.toString('utf8');
      const pid = parsePid(text);
      if (pid !== null) finish(pid);
    });
  });
}

function parsePid(text: string): number | null {
  const match = /"child-pid"\s*:\s*(\d+)/.exec(text);
  return match === null ? null : Number(match[1]);
}

/** The agent's exit as its init reported it (fd 4): `exit N` or `signal N`; null when it said nothing. */
export function readStatus(
  stream: Readable | null | undefined,
): Promise<{ exitCode: number | null; signal: NodeJS.Signals | null } | null> {
  return new Promise((resolve) => {
    if (stream === null || stream === undefined) return resolve(null);
    let text = '';
    stream.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    stream.on('error', () => resolve(null));
    stream.on('close', () => {
      const match = /^(exit|signal) (\d+)$/m.exec(text);
      if (match === null) return resolve(null);
      const n = Number(match[2]);
      if (match[1] === 'exit') return resolve({ exitCode: n, signal: null });
      const name = Object.entries(osConstants.signals).find(([, value]) => value === n)?.[0] as
        NodeJS.Signals | undefined;
      resolve({ exitCode: null, signal: name ?? null });
    });
  });
}
