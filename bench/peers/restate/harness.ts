import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readdirSync, statSync, writeFileSync, closeSync } from 'node:fs';
import net from 'node:net';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { BenchFailure } from '../../support/benchmark.ts';
import { sleep, withTimeout, type Cleanup } from '../../support/harness.ts';

/**
 * The Restate side of the peers benchmark: Restate's server (the native binary of
 * `@restatedev/restate-server`, installed by scripts/install-restate.sh into a cache keyed by
 * bench/peers/restate/package-lock.json) and the peer's service process (service.mjs), both
 * started and stopped here, both on 127.0.0.1 only; and a client for Restate's ingress and admin
 * APIs (plain HTTP, as `curl` would call them).
 */

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..', '..', '..');
const SERVICE = join(HERE, 'service.mjs');
const INSTALLER = join(ROOT, 'scripts', 'install-restate.sh');

/** The server binary, installing the packages first if they are not there (one `npm ci` into the cache, ~15 s). */
export function restateServerBinary(log: (line: string) => void): string {
  const bin = join(
    HERE,
    'node_modules',
    '@restatedev',
    `restate-server-${process.platform}-${process.arch}`,
    'bin',
    'restate-server',
  );
  const sdk = join(HERE, 'node_modules', '@restatedev', 'restate-sdk', 'package.json');
  if (!existsSync(bin) || !existsSync(sdk)) {
    log('  installing Restate (scripts/install-restate.sh)…');
    execFileSync('bash', [INSTALLER], { stdio: ['ignore', 'ignore', 'inherit'] });
  }
  if (!existsSync(bin)) throw new BenchFailure(`no Restate server binary at ${bin} after scripts/install-restate.sh`);
  return bin;
}

export function restateVersion(bin: string): string {
  return execFileSync(bin, ['--version'], { encoding: 'utf8' }).trim();
}

/** A free TCP port on 127.0.0.1 (bound, read, closed). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** Every TCP socket `pid` listens on (`ss -ltnpH`): its local address:port. */
export function listeningAddresses(pid: number): string[] {
  const out = execFileSync('ss', ['-ltnpH'], { encoding: 'utf8' });
  return out
    .split('\n')
    .filter((line) => line.includes(`pid=${pid},`))
    .map((line) => line.trim().split(/\s+/)[3] ?? '?');
}

/** Sizes of every file under `dir`, in bytes. */
export function dirBytes(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    try {
      if (entry.isDirectory()) total += dirBytes(path);
      else if (entry.isFile()) total += statSync(path).size;
    } catch {
      // removed meanwhile (RocksDB compactions)
    }
  }
  return total;
}

export interface RestateServer {
  pid: number;
  ingress: string;
  admin: string;
  dataDir: string;
  /** Every address the server listens on (TCP), as `ss` shows them. */
  listening: string[];
  stop(): Promise<void>;
}

/**
 * Restate's server with its defaults (durability included: a single node, its log and partition
 * store in RocksDB with the WAL on, fsync on as shipped), except: every listener bound to 127.0.0.1
 * on a free port (ingress, admin, node-to-node) and advertised as such, TCP only (no Unix sockets),
 * its data in `dir`, and its telemetry off (`disable-telemetry`). Checks with `ss` that it listens on
 * 127.0.0.1 only.
 */
export async function startRestateServer(bin: string, dir: string, cleanup: Cleanup): Promise<RestateServer> {
  const [ingressPort, adminPort, nodePort] = [await freePort(), await freePort(), await freePort()];
  const dataDir = join(dir, 'data');
  mkdirSync(dataDir, { recursive: true });
  const config = join(dir, 'restate.toml');
  writeFileSync(
    config,
    [
      'node-name = "bench"',
      `base-dir = "${dataDir}"`,
      `bind-address = "127.0.0.1:${nodePort}"`,
      `advertised-address = "http://127.0.0.1:${nodePort}/"`,
      'disable-telemetry = true',
      'log-format = "json"',
      '[admin]',
      `bind-address = "127.0.0.1:${adminPort}"`,
      `advertised-admin-endpoint = "http://127.0.0.1:${adminPort}/"`,
      '[ingress]',
      `bind-address = "127.0.0.1:${ingressPort}"`,
      `advertised-ingress-endpoint = "http://127.0.0.1:${ingressPort}/"`,
      '',
    ].join('\n'),
  );
  const logFd = openSync(join(dir, 'restate-server.log'), 'a');
  const child = spawn(bin, ['--config-file', config, '--no-logo', '--listen-mode', 'tcp'], {
    cwd: dir,
    stdio: ['ignore', logFd, logFd],
  });
  closeSync(logFd);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  };
  cleanup.add(`restate-server ${child.pid ?? '?'}`, stop);
  process.once('exit', () => child.kill('SIGKILL'));
  const admin = `http://127.0.0.1:${adminPort}`;
  const ingress = `http://127.0.0.1:${ingressPort}`;
  await withTimeout(
    (async () => {
      for (;;) {
        if (child.exitCode !== null)
          throw new BenchFailure(`restate-server exited (${child.exitCode}); see ${join(dir, 'restate-server.log')}`);
        const ok = await fetch(`${admin}/health`)
          .then((r) => r.ok)
          .catch(() => false);
        const ready =
          ok &&
          (await fetch(`${ingress}/restate/health`)
            .then((r) => r.ok)
            .catch(() => false));
        if (ready) return;
        await sleep(100);
      }
    })(),
    60_000,
    'restate-server to answer on its admin and ingress ports',
  );
  const pid = child.pid ?? -1;
  const listening = listeningAddresses(pid);
  const elsewhere = listening.filter((a) => !a.startsWith('127.0.0.1:'));
  if (elsewhere.length > 0 || listening.length === 0)
    throw new BenchFailure(`restate-server listens on ${listening.join(', ') || 'nothing'}: expected 127.0.0.1 only`);
  return { pid, ingress, admin, dataDir, listening, stop };
}

export type AgentProfile =
  { kind: 'inproc'; messages: number } | { kind: 'process'; command: string; args: readonly string[] };

/** The peer's service process (service.mjs): the virtual object `session`, on 127.0.0.1:`port`. */
export class RestateService {
  readonly #child: ChildProcess;
  readonly #exited: Promise<void>;
  readonly port: number;
  readonly problems: string[] = [];

  private constructor(child: ChildProcess, port: number) {
    this.#child = child;
    this.port = port;
    this.#exited = new Promise((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve();
      else child.once('exit', () => resolve());
    });
  }

  get pid(): number {
    return this.#child.pid ?? -1;
  }

  get alive(): boolean {
    return this.#child.exitCode === null && this.#child.signalCode === null;
  }

  static async start(port: number, agents: Record<string, AgentProfile>, cleanup: Cleanup): Promise<RestateService> {
    const child = spawn(process.execPath, ['--import', 'tsx', SERVICE], {
      cwd: ROOT,
      env: {
        ...process.env,
        RESTATE_PEER_PORT: String(port),
        RESTATE_PEER_AGENTS: JSON.stringify(agents),
        RESTATE_LOGGING: 'WARN',
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const service = new RestateService(child, port);
    cleanup.add(`restate peer service ${child.pid ?? '?'}`, () => service.stop());
    child.stdin?.on('error', () => undefined);
    const tail: string[] = [];
    createInterface({ input: child.stderr as NodeJS.ReadableStream }).on('line', (line) => {
      // The SDK warns once that requests are not signed (the endpoint listens on 127.0.0.1 only).
      if (line.includes('without validating request signatures')) return;
      tail.push(line);
      if (tail.length > 20) tail.shift();
      if (/ERROR|Error|error/.test(line)) service.problems.push(line.slice(0, 400));
    });
    const ready = new Promise<void>((resolve, reject) => {
      createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
        if (line.startsWith('restate-peer listening')) resolve();
      });
      child.once('exit', (code, signal) =>
        reject(
          new BenchFailure(`restate peer service exited (${code ?? signal}) before it listened:\n${tail.join('\n')}`),
        ),
      );
    });
    await withTimeout(ready, 60_000, 'the restate peer service to listen');
    return service;
  }

  /** kill -9: the process and nothing else (its agents are left as they are). */
  async kill9(): Promise<void> {
    this.#child.kill('SIGKILL');
    await this.#exited;
  }

  async stop(): Promise<void> {
    if (!this.alive) return;
    this.#child.kill('SIGTERM');
    const timer = setTimeout(() => this.#child.kill('SIGKILL'), 10_000);
    await this.#exited;
    clearTimeout(timer);
    this.#child.stdin?.destroy();
  }
}

export interface PeerMessage {
  seq: number;
  turn: number;
  attempt: number;
  type: string;
  content: unknown;
}

/** Restate's ingress and admin APIs, over HTTP. */
export class RestateClient {
  constructor(
    readonly ingress: string,
    readonly admin: string,
  ) {}

  async #json(url: string, init: RequestInit): Promise<unknown> {
    const response = await fetch(url, init);
    const text = await response.text();
    if (!response.ok)
      throw new BenchFailure(`${init.method ?? 'GET'} ${url}: ${response.status} ${text.slice(0, 300)}`);
    return text === '' ? null : JSON.parse(text);
  }

  #post(path: string, body: unknown): Promise<unknown> {
    return this.#json(`${this.ingress}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  }

  /** Registers the service at `uri` (Restate discovers its handlers). */
  async register(uri: string): Promise<void> {
    await this.#json(`${this.admin}/deployments`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ uri, force: true }),
    });
  }

  /** One turn, request-response: resolves once the turn ended. */
  prompt(sessionId: string, agent: string, prompt: string): Promise<{ state: string; seq: number; attempts: number }> {
    return this.#post(`/session/${encodeURIComponent(sessionId)}/prompt`, { prompt, agent }) as Promise<{
      state: string;
      seq: number;
      attempts: number;
    }>;
  }

  /** One turn, sent: resolves with its invocation id once Restate accepted it. */
  async send(sessionId: string, agent: string, prompt: string): Promise<string> {
    const r = (await this.#post(`/session/${encodeURIComponent(sessionId)}/prompt/send`, { prompt, agent })) as {
      invocationId: string;
    };
    return r.invocationId;
  }

  /** Waits for an invocation's end: its result, or its failure (e.g. 409 Cancelled) as `{ status, body }`. */
  async attach(invocationId: string): Promise<{ status: number; body: string }> {
    const response = await fetch(`${this.ingress}/restate/invocation/${invocationId}/attach`);
    return { status: response.status, body: await response.text() };
  }

  /** Restate's invocation cancellation (admin API); resolves once the server accepted it. */
  async cancel(invocationId: string): Promise<number> {
    const response = await fetch(`${this.admin}/invocations/${invocationId}/cancel`, { method: 'PATCH' });
    await response.text();
    if (response.status !== 200 && response.status !== 202)
      throw new BenchFailure(`cancel ${invocationId}: ${response.status}`);
    return response.status;
  }

  view(sessionId: string): Promise<{ state: string | null; seq: number; turns: number }> {
    return this.#post(`/session/${encodeURIComponent(sessionId)}/view`, {}) as Promise<{
      state: string | null;
      seq: number;
      turns: number;
    }>;
  }

  messages(sessionId: string, from = 1, to = from + 9999): Promise<PeerMessage[]> {
    return this.#post(`/session/${encodeURIComponent(sessionId)}/messages`, { from, to }) as Promise<PeerMessage[]>;
  }
}
