import { spawn } from 'node:child_process';
import { accessSync, constants as fsConstants, existsSync, readFileSync } from 'node:fs';
import { mkdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { pingRedis, redisServerInfo, type PingResult } from './probe.ts';

/**
 * A Redis for a single machine: reuse whatever answers PING on 127.0.0.1:port, else start
 * `redis-server` (AOF on, bound to 127.0.0.1, data in `dataDir`) as a detached child that outlives
 * the caller. Its pid file (`dataDir/redis.pid`, written by redis itself) lets a later call, from
 * any process, recognise and stop it.
 */

export const DEFAULT_LOCAL_REDIS_PORT = 6379;
export const LOCAL_REDIS_PID_FILE = 'redis.pid';
export const LOCAL_REDIS_LOG_FILE = 'redis.log';
const READY_TIMEOUT_MS = 10_000;
const STOP_TIMEOUT_MS = 10_000;

export interface EnsureLocalRedisOptions {
  /** Where the AOF, the pid file and the log go (created if missing). */
  dataDir: string;
  port?: number;
  /** How long to wait for a server to answer PING (default 10 s). */
  timeoutMs?: number;
  /** The PATH searched for redis-server (default: process.env.PATH). */
  pathEnv?: string;
}

export type LocalRedis =
  | {
      url: string;
      /** true: this call started redis-server (it keeps running after this process exits). */
      started: boolean;
      pid?: number;
      /** Present when the server is the one recorded in dataDir's pid file: SIGTERM, wait until it is gone. */
      stop?(): Promise<void>;
    }
  | { error: string };

export function installRedisHelp(port: number): string {
  return [
    `No Redis answers on 127.0.0.1:${port} and redis-server is not installed. Get one:`,
    '  Debian/Ubuntu:  sudo apt-get install redis-server',
    '  macOS:          brew install redis',
    "  Docker:         docker compose up -d redis   (from the sessiond repository's docker-compose.yml)",
    'or point sessiond at an existing server: REDIS_URL=redis://[:password@]host:port',
  ].join('\n');
}

/** Absolute path of an executable `name` on `pathEnv` (default PATH), or null. */
export function findExecutable(name: string, pathEnv: string | undefined = process.env.PATH): string | null {
  for (const dir of (pathEnv ?? '').split(path.delimiter)) {
    if (dir === '') continue;
    const candidate = path.join(dir, name);
    try {
      accessSync(candidate, fsConstants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return null;
}

export function findRedisServer(pathEnv?: string): string | null {
  return findExecutable('redis-server', pathEnv);
}

/** Is `pid` a live (not zombie) process? On Linux, also: is it a redis-server? */
export function isRedisServerProcess(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  if (!existsSync('/proc/self')) return true;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    if (state === 'Z' || state === 'X') return false;
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('redis-server');
  } catch {
    // No such process (or not ours): not our redis-server.
    return false;
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function readPidFile(dataDir: string): Promise<number | null> {
  try {
    const pid = Number((await readFile(path.join(dataDir, LOCAL_REDIS_PID_FILE), 'utf8')).trim());
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    // No pid file: no server of ours.
    return null;
  }
}

/** SIGTERM (Redis then fsyncs its AOF and exits), wait; SIGKILL if it is still there after the timeout. */
export async function stopRedisProcess(pid: number, timeoutMs = STOP_TIMEOUT_MS): Promise<void> {
  if (!isRedisServerProcess(pid)) return;
  try {
    process.kill(pid, 'SIGCONT');
    process.kill(pid, 'SIGTERM');
  } catch {
    // Already gone.
    return;
  }
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!isRedisServerProcess(pid)) return;
    await delay(20);
  }
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // Already gone.
    return;
  }
  while (isRedisServerProcess(pid) && Date.now() < deadline + 2000) await delay(20);
}

/** Polls PING until it answers, `until()` says to give up, or the timeout passes. */
async function waitForPong(port: number, timeoutMs: number, until: () => boolean = () => false): Promise<PingResult> {
  const deadline = Date.now() + timeoutMs;
  let last: PingResult = { status: 'timeout', detail: `no answer on 127.0.0.1:${port}` };
  for (let wait = 5; ; wait = Math.min(wait * 2, 100)) {
    last = await pingRedis({ port, timeoutMs: Math.max(100, Math.min(1000, deadline - Date.now())) });
    if (last.status === 'pong' || last.status === 'auth-required' || last.status === 'not-redis') return last;
    if (until() || Date.now() >= deadline) return last;
    await delay(wait);
  }
}

/** The pid the server on `port` reports, when it is the one recorded in dataDir's pid file. */
async function ownedPid(dataDir: string, port: number): Promise<number | null> {
  const recorded = await readPidFile(dataDir);
  if (recorded === null) return null;
  const info = await redisServerInfo({ port });
  return info !== null && Number(info.process_id) === recorded ? recorded : null;
}

function answerError(result: PingResult, port: number): string | null {
  switch (result.status) {
    case 'auth-required':
    case 'auth-failed':
      return `a Redis server on 127.0.0.1:${port} requires a password: set REDIS_URL=redis://:PASSWORD@127.0.0.1:${port}`;
    case 'not-redis':
      return `127.0.0.1:${port} is in use by something that is not Redis: pick another port, or set REDIS_URL`;
    default:
      return null;
  }
}

async function reuse(dataDir: string, port: number): Promise<LocalRedis> {
  const url = `redis://127.0.0.1:${port}`;
  const pid = await ownedPid(dataDir, port);
  if (pid === null) return { url, started: false };
  return { url, started: false, pid, stop: () => stopRedisProcess(pid) };
}

async function logTail(dataDir: string): Promise<string> {
  try {
    const text = await readFile(path.join(dataDir, LOCAL_REDIS_LOG_FILE), 'utf8');
    return text.trimEnd().split('\n').slice(-5).join('\n');
  } catch {
    // No log to quote.
    return '';
  }
}

/**
 * A Redis on 127.0.0.1:port (default 6379): the one already there, or a redis-server started now
 * with AOF in `dataDir`. Resolves with `{ error }` (never rejects) when neither is possible; the
 * message says how to get a Redis.
 */
export async function ensureLocalRedis(options: EnsureLocalRedisOptions): Promise<LocalRedis> {
  const port = options.port ?? DEFAULT_LOCAL_REDIS_PORT;
  const timeoutMs = options.timeoutMs ?? READY_TIMEOUT_MS;
  if (!Number.isInteger(port) || port < 1 || port > 65535) return { error: `invalid port ${port}: must be 1–65535` };
  const dataDir = path.resolve(options.dataDir);
  const url = `redis://127.0.0.1:${port}`;

  let probe = await pingRedis({ port, timeoutMs: 1000 });
  if (probe.status === 'pong') return reuse(dataDir, port);
  const refused = answerError(probe, port);
  if (refused !== null) return { error: refused };

  // Something listens but does not answer yet (loading its AOF, paused, busy), or our own server
  // from an earlier call is still starting: wait for it rather than start a second one.
  const recorded = await readPidFile(dataDir);
  if (probe.status !== 'refused' || (recorded !== null && isRedisServerProcess(recorded))) {
    probe = await waitForPong(port, timeoutMs);
    if (probe.status === 'pong') return reuse(dataDir, port);
    const message = answerError(probe, port);
    if (message !== null) return { error: message };
    if (probe.status !== 'refused')
      return {
        error: `a server on 127.0.0.1:${port} does not answer PING (${probe.detail}); stop it or pick another port`,
      };
  }

  const bin = findRedisServer(options.pathEnv);
  if (bin === null) return { error: installRedisHelp(port) };
  try {
    await mkdir(dataDir, { recursive: true });
  } catch (err) {
    return { error: `cannot create the Redis data directory ${dataDir}: ${(err as Error).message}` };
  }
  if (recorded !== null && !isRedisServerProcess(recorded))
    await rm(path.join(dataDir, LOCAL_REDIS_PID_FILE), { force: true });

  const args = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--dir',
    dataDir,
    '--appendonly',
    'yes',
    '--appendfsync',
    'everysec',
    '--daemonize',
    'no',
    '--pidfile',
    path.join(dataDir, LOCAL_REDIS_PID_FILE),
    '--logfile',
    path.join(dataDir, LOCAL_REDIS_LOG_FILE),
  ];
  let exited = false;
  let spawnError: string | null = null;
  const child = spawn(bin, args, { cwd: dataDir, detached: true, stdio: 'ignore' });
  child.on('error', (err) => {
    spawnError = err.message;
    exited = true;
  });
  child.on('exit', () => {
    exited = true;
  });
  child.unref();

  const ready = await waitForPong(port, timeoutMs, () => exited);
  if (ready.status === 'pong') {
    const pid = child.pid;
    if (!exited && pid !== undefined && Number((await redisServerInfo({ port }))?.process_id) === pid) {
      return { url, started: true, pid, stop: () => stopRedisProcess(pid) };
    }
    // Another caller started one on this port at the same time: use theirs.
    return reuse(dataDir, port);
  }
  if (!exited && child.pid !== undefined) await stopRedisProcess(child.pid, 2000);
  const message = answerError(ready, port);
  if (message !== null) return { error: message };
  const tail = await logTail(dataDir);
  return {
    error: `redis-server did not start on 127.0.0.1:${port}${spawnError !== null ? ` (${spawnError})` : ''}${tail !== '' ? `:\n${tail}` : ''}`,
  };
}
