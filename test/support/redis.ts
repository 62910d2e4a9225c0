import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { findRedisServer, isRedisServerProcess } from '../../src/runtime/redis/local-server.ts';
import { pingRedis } from '../../src/runtime/redis/probe.ts';

/**
 * A real redis-server per test file: free port on 127.0.0.1, fresh temp dir, no RDB snapshots,
 * optional AOF (fsync always) and password. Every server started here dies with the test process,
 * however it ends: an 'exit' hook SIGKILLs them, and a small reaper process (one per test process)
 * SIGKILLs them when the test process dies without running it (SIGKILL, SIGTERM, crash).
 */

export interface StartRedisOptions {
  /** AOF on with `appendfsync always`: every acknowledged write survives restart() and kill(). */
  aof?: boolean;
  /** `--requirepass`; the url then carries it. */
  password?: string;
  /** More redis-server arguments (e.g. `--cluster-enabled yes`, see redis-cluster.ts). */
  extraArgs?: readonly string[];
}

export interface RedisServer {
  /** `redis://127.0.0.1:PORT`, or `redis://:PASSWORD@127.0.0.1:PORT` (password percent-encoded). */
  readonly url: string;
  readonly port: number;
  readonly dir: string;
  /** The current redis-server pid (changes on restart). */
  readonly pid: number;
  readonly password: string | undefined;
  /** SIGTERM, wait for the exit (SIGKILL after 5 s), remove the dir. Idempotent. */
  stop(): Promise<void>;
  /** SIGKILL (a crash): the dir stays, so restart() recovers what the AOF holds. Resolves once it is gone. */
  kill(): Promise<void>;
  /** Stops the process (if running), keeps dir and AOF, starts again on the same port, waits for PING. */
  restart(): Promise<void>;
  /** SIGSTOP: the server holds connections but answers nothing. */
  pause(): void;
  /** SIGCONT. */
  resume(): void;
}

const READY_TIMEOUT_MS = 10_000;
const STOP_TIMEOUT_MS = 5_000;
const PORT_ATTEMPTS = 3;

const live = new Map<number, ChildProcess>();
const dirs = new Set<string>();
const external = new Set<number>();
let exitHookInstalled = false;
let reaper: ChildProcess | null = null;

/**
 * Runs in its own process group, immune to SIGINT/SIGTERM/SIGHUP; once its stdin (our pipe) closes,
 * i.e. once the test process is gone however it ended, SIGKILLs the registered redis-server pids
 * and removes the registered dirs. Protocol: lines `+p PID`, `-p PID`, `+d DIR`, `-d DIR`.
 */
const REAPER_SOURCE = `
const fs = require('node:fs');
const pids = new Set();
const dirs = new Set();
let buf = '';
for (const s of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(s, () => {});
const reap = () => {
  for (const pid of pids) {
    try { if (!fs.readFileSync('/proc/' + pid + '/cmdline', 'utf8').includes('redis-server')) continue; }
    catch { if (process.platform === 'linux') continue; }
    try { process.kill(pid, 'SIGKILL'); } catch {}
  }
  for (const dir of dirs) { try { fs.rmSync(dir, { recursive: true, force: true }); } catch {} }
  process.exit(0);
};
process.stdin.setEncoding('utf8');
process.stdin.on('data', (d) => {
  buf += d;
  for (let i = buf.indexOf('\\n'); i >= 0; i = buf.indexOf('\\n')) {
    const line = buf.slice(0, i); buf = buf.slice(i + 1);
    const set = line[1] === 'p' ? pids : dirs;
    const value = line[1] === 'p' ? Number(line.slice(3)) : line.slice(3);
    if (line[0] === '+') set.add(value); else set.delete(value);
  }
});
process.stdin.on('end', reap);
process.stdin.on('error', reap);
`;

function tellReaper(line: string): void {
  if (reaper === null) {
    const child = spawn(process.execPath, ['-e', REAPER_SOURCE], {
      stdio: ['pipe', 'ignore', 'ignore'],
      detached: true,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
    });
    child.on('error', () => {});
    child.stdin?.on('error', () => {});
    child.unref();
    (child.stdin as unknown as net.Socket | null)?.unref();
    reaper = child;
  }
  reaper.stdin?.write(`${line}\n`);
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const pid of live.keys()) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    for (const pid of external) {
      try {
        if (isRedisServerProcess(pid)) process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });
}

function track(child: ChildProcess): void {
  const pid = child.pid;
  if (pid === undefined) return;
  installExitHook();
  live.set(pid, child);
  tellReaper(`+p ${pid}`);
}

function untrack(pid: number): void {
  if (live.delete(pid)) tellReaper(`-p ${pid}`);
}

function trackDir(dir: string): void {
  installExitHook();
  dirs.add(dir);
  tellReaper(`+d ${dir}`);
}

async function removeDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
  if (dirs.delete(dir)) tellReaper(`-d ${dir}`);
}

/**
 * Makes a redis-server this helper did not start (e.g. one `ensureLocalRedis` left detached) die
 * with the test process too, however it ends. Harmless once the server is already stopped.
 */
export function killWithTestProcess(pid: number): void {
  installExitHook();
  external.add(pid);
  tellReaper(`+p ${pid}`);
}

/** A port that was free a moment ago on 127.0.0.1 (bind to 0, read, close). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => (port > 0 ? resolve(port) : reject(new Error('could not get a free port'))));
    });
  });
}

/** A unique key prefix for one test: `t-<name>-<random>` (letters, digits, '-', '_' only). */
export function uniquePrefix(name: string): string {
  const safe =
    name
      .replace(/[^A-Za-z0-9_-]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 40) || 'test';
  return `t-${safe}-${randomBytes(5).toString('hex')}`;
}

function requireRedisServer(): string {
  const bin = findRedisServer();
  if (bin === null) {
    throw new Error(
      'redis-server is not on PATH; the tests need a real one. Install it: apt-get install redis-server (Debian/Ubuntu) / brew install redis (macOS)',
    );
  }
  return bin;
}

function exitOf(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

type Launch = { ok: true; child: ChildProcess } | { ok: false; addressInUse: boolean; message: string };

async function launch(bin: string, port: number, dir: string, options: StartRedisOptions): Promise<Launch> {
  const args = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--dir',
    dir,
    '--save',
    '',
    '--appendonly',
    options.aof === true ? 'yes' : 'no',
    ...(options.aof === true ? ['--appendfsync', 'always'] : []),
    '--daemonize',
    'no',
    '--logfile',
    '',
    ...(options.password !== undefined ? ['--requirepass', options.password] : []),
    ...(options.extraArgs ?? []),
  ];
  const child = spawn(bin, args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (chunk: Buffer): void => {
    output = (output + chunk.toString('utf8')).slice(-8192);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  let spawnError: Error | null = null;
  child.on('error', (err) => {
    spawnError = err;
  });
  track(child);
  child.unref();
  (child.stdout as unknown as net.Socket | null)?.unref();
  (child.stderr as unknown as net.Socket | null)?.unref();
  const exited = exitOf(child).then(() => {
    if (child.pid !== undefined) untrack(child.pid);
  });

  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (let wait = 2; ; wait = Math.min(wait * 2, 50)) {
    const gone = child.exitCode !== null || child.signalCode !== null || spawnError !== null;
    if (!gone) {
      const ping = await pingRedis({ port, password: options.password, timeoutMs: 500 });
      if (ping.status === 'pong') return { ok: true, child };
    }
    if (gone || Date.now() >= deadline) {
      if (!gone) child.kill('SIGKILL');
      await exited;
      const reason =
        spawnError !== null
          ? (spawnError as Error).message
          : gone
            ? `exited (${child.exitCode ?? child.signalCode})`
            : `did not answer PING within ${READY_TIMEOUT_MS} ms`;
      return {
        ok: false,
        addressInUse: /address already in use/i.test(output),
        message: `redis-server on 127.0.0.1:${port} ${reason}${output.trim() !== '' ? `:\n${output.trim().split('\n').slice(-8).join('\n')}` : ''}`,
      };
    }
    await delay(wait);
  }
}

/** Starts a redis-server for this test file; see RedisServer. */
export async function startRedis(options: StartRedisOptions = {}): Promise<RedisServer> {
  const bin = requireRedisServer();
  const dir = await mkdtemp(path.join(os.tmpdir(), 'sessiond-test-redis-'));
  trackDir(dir);
  let child: ChildProcess;
  let port = 0;
  try {
    for (let attempt = 1; ; attempt++) {
      port = await freePort();
      const result = await launch(bin, port, dir, options);
      if (result.ok) {
        child = result.child;
        break;
      }
      if (!result.addressInUse || attempt >= PORT_ATTEMPTS) throw new Error(result.message);
    }
  } catch (err) {
    await removeDir(dir);
    throw err;
  }

  const auth = options.password !== undefined ? `:${encodeURIComponent(options.password)}@` : '';
  let stopped = false;

  async function terminate(signal: NodeJS.Signals): Promise<void> {
    const current = child;
    if (current.exitCode !== null || current.signalCode !== null) return;
    const exited = exitOf(current);
    try {
      if (signal !== 'SIGKILL') current.kill('SIGCONT');
      current.kill(signal);
    } catch {
      // already gone
    }
    const timer = delay(STOP_TIMEOUT_MS).then(() => 'timeout' as const);
    if ((await Promise.race([exited.then(() => 'exited' as const), timer])) === 'timeout') {
      current.kill('SIGKILL');
      await exited;
    }
  }

  const server: RedisServer = {
    url: `redis://${auth}127.0.0.1:${port}`,
    port,
    dir,
    get pid(): number {
      return child.pid ?? -1;
    },
    password: options.password,
    async stop() {
      if (stopped) return;
      stopped = true;
      await terminate('SIGTERM');
      await removeDir(dir);
    },
    async kill() {
      await terminate('SIGKILL');
    },
    async restart() {
      if (stopped) throw new Error('restart() after stop(): the server and its dir are gone');
      await terminate('SIGTERM');
      // The port is ours but may linger for a moment: retry the same port a few times.
      for (let attempt = 1; ; attempt++) {
        const result = await launch(bin, port, dir, options);
        if (result.ok) {
          child = result.child;
          return;
        }
        if (!result.addressInUse || attempt >= 20) throw new Error(result.message);
        await delay(100);
      }
    },
    pause() {
      child.kill('SIGSTOP');
    },
    resume() {
      child.kill('SIGCONT');
    },
  };
  return server;
}
