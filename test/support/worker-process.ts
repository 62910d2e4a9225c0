/**
 * `sessiond worker` as its own process, the way it runs in production (configured by env), for
 * tests that kill -9 a worker, SIGTERM it, or need a second host-like worker. Every process started
 * here is SIGKILLed by `killAllWorkerProcesses()` (for afterAll) and, as a last resort, when the
 * test process exits. Agent processes a killed worker leaves behind are the caller's to reap
 * (`reapOrphans` does it once the workers are dead).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SESSIOND_BIN } from './cli.ts';
import type { PiEnv } from './pi-env.ts';
import { NO_DISCOVERY, piBin, REPO_ROOT } from './pi-env.ts';

/** Variables of a test worker's environment that its agents get by name (SESSIOND_AGENT_ENV). */
export const AGENT_ENV_NAMES = ['PI_OFFLINE', 'PI_TELEMETRY'];

export interface WorkerProcessOptions {
  redisUrl: string;
  prefix: string;
  env: PiEnv;
  /** SESSIOND_STATE_DIR (pi's managed agent dir lives under it). */
  stateDir: string;
  /** pi's local session dir on this "host" (default: env.sessionDir). */
  sessionDir?: string;
  concurrency?: number;
  /** Durations as the config reads them ("2s", "500ms"); null: not set (the worker's default). */
  leaseTtl?: string | null;
  stalledInterval?: string | null;
  holdBackoff?: string;
  poll?: string;
  heartbeat?: string;
  shutdownGrace?: string;
  /** More env (wins). */
  extraEnv?: Record<string, string>;
}

export interface WorkerProcess {
  readonly pid: number;
  readonly child: ChildProcess;
  /** The worker id it logged when it started (`host:pid:xxxx`). */
  readonly workerId: string;
  /** Resolves when the process has exited. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Everything it wrote on stdout and stderr so far (for assertions and failure messages). */
  output(): string;
  kill(signal: NodeJS.Signals): void;
}

const STARTED = /sessiond worker (\S+) started/;
const live = new Set<ChildProcess>();
let exitHook = false;

function installExitHook(): void {
  if (exitHook) return;
  exitHook = true;
  process.on('exit', () => {
    for (const child of live) {
      try {
        child.kill('SIGKILL');
      } catch {
        // gone
      }
    }
  });
}

/** The env a worker process is configured with (also usable for other `sessiond` commands). */
/**
 * A worker "host" of its own under `dir` (its state dir, pi's sessions in `pi/`, its workspaces in `workspaces/`),
 * with workspaces on and the fleet's shared `store`; a dead worker's sessions taken over fast (lease 2 s, stalled
 * check 1 s) unless `fastTakeover` is false. `agents`: SESSIOND_AGENT_OPTIONS.
 */
export function workspaceHost(o: {
  redisUrl: string;
  prefix: string;
  env: PiEnv;
  dir: string;
  store: string;
  agents?: unknown;
  fastTakeover?: boolean;
}): WorkerProcessOptions {
  mkdirSync(join(o.dir, 'pi'), { recursive: true });
  return {
    redisUrl: o.redisUrl,
    prefix: o.prefix,
    env: o.env,
    stateDir: o.dir,
    sessionDir: join(o.dir, 'pi'),
    ...(o.fastTakeover === false ? {} : { leaseTtl: '2s', stalledInterval: '1s' }),
    extraEnv: {
      SESSIOND_WORKSPACES_ENABLED: 'true',
      SESSIOND_WORKSPACES: join(o.dir, 'workspaces'),
      SESSIOND_WORKSPACE_STORE: o.store,
      ...(o.agents === undefined ? {} : { SESSIOND_AGENT_OPTIONS: JSON.stringify(o.agents) }),
    },
  };
}

export function workerEnv(o: WorkerProcessOptions): Record<string, string> {
  return {
    ...o.env.env,
    REDIS_URL: o.redisUrl,
    SESSIOND_PREFIX: o.prefix,
    SESSIOND_STATE_DIR: o.stateDir,
    SESSIOND_CONCURRENCY: String(o.concurrency ?? 2),
    ...(o.leaseTtl === null ? {} : { SESSIOND_LEASE_TTL: o.leaseTtl ?? '2s' }),
    ...(o.stalledInterval === null ? {} : { SESSIOND_STALLED_INTERVAL: o.stalledInterval ?? '500ms' }),
    SESSIOND_HOLD_BACKOFF: o.holdBackoff ?? '1500ms',
    SESSIOND_POLL: o.poll ?? '250ms',
    SESSIOND_HEARTBEAT: o.heartbeat ?? '1s',
    SESSIOND_SHUTDOWN_GRACE: o.shutdownGrace ?? '10s',
    SESSIOND_PI_COMMAND: piBin,
    SESSIOND_PI_AGENT_DIR: o.env.agentDir,
    SESSIOND_PI_SESSION_DIR: o.sessionDir ?? o.env.sessionDir,
    SESSIOND_PI_ARGS: JSON.stringify(NO_DISCOVERY),
    // Sessions run in temp dirs; pi's offline switches are passed to it by name (its env is sealed).
    SESSIOND_WORKSPACE: tmpdir(),
    SESSIOND_AGENT_ENV: AGENT_ENV_NAMES.join(','),
    SESSIOND_LOG_LEVEL: 'info',
    // The test file's sandbox mode (vitest.config.ts: the host's own for HOST_SANDBOX, else none unless set).
    SESSIOND_SANDBOX: process.env.SESSIOND_SANDBOX ?? 'auto',
    ...(o.extraEnv ?? {}),
  };
}

/** Starts `node bin/sessiond.mjs worker` and resolves once it says it started (its orphan reaping is done by then). */
export async function startWorkerProcess(o: WorkerProcessOptions, timeoutMs = 30_000): Promise<WorkerProcess> {
  installExitHook();
  const child = spawn(process.execPath, [SESSIOND_BIN, 'worker'], {
    cwd: REPO_ROOT,
    env: workerEnv(o),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (child.pid === undefined) throw new Error('sessiond worker did not start');
  live.add(child);
  let out = '';
  const keep = (chunk: Buffer): void => {
    out += chunk.toString('utf8');
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null)
      resolve({ code: child.exitCode, signal: child.signalCode });
    else child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  void exited.then(() => live.delete(child));
  const workerId = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`sessiond worker did not start within ${timeoutMs} ms:\n${out}`)),
      timeoutMs,
    );
    const look = (): void => {
      const match = STARTED.exec(out);
      if (match?.[1] !== undefined) {
        clearTimeout(timer);
        child.stderr?.off('data', look);
        resolve(match[1]);
      }
    };
    child.stderr?.on('data', look);
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`sessiond worker exited (code ${code}, signal ${signal}) before it started:\n${out}`));
    });
    look();
  });
  return {
    pid: child.pid,
    child,
    workerId,
    exited,
    output: () => out,
    kill: (signal) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    },
  };
}

/** SIGKILLs every worker process still running and waits for them to be gone. */
export async function killAllWorkerProcesses(): Promise<void> {
  const children = [...live];
  await Promise.all(
    children.map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          child.once('exit', () => resolve());
          child.kill('SIGKILL');
        }),
    ),
  );
}
