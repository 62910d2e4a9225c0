import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { deploymentPolicy } from '../../src/runtime/deployment-policy.ts';
import { Runtime, type SessionRecord } from '../../src/runtime/runtime.ts';
import { SessionWorker, WORKER_DEFAULTS, type WorkerOptions } from '../../src/runtime/worker.ts';
import { createSessionQueue } from '../../src/runtime/queue.ts';
import { createKeys, type Keys } from '../../src/runtime/keys.ts';
import { findAgentProcesses } from '../../src/runtime/orphans.ts';
import type { StoredMessage } from '../../src/runtime/store/session-store.ts';
import { startFakeModelServer, type FakeModelServer, type Script } from './fake-model-server.ts';
import type { PiEnv } from './pi-env.ts';
import { createPiEnv, NO_DISCOVERY, piBin } from './pi-env.ts';
import { startRedis, uniquePrefix, type RedisServer } from './redis.ts';
import { clusterAsServer, startRedisCluster, type RedisCluster } from './redis-cluster.ts';
import { createRedis } from '../../src/runtime/redis/connection.ts';

/** What a runtime suite runs on: one redis-server, or a real 3-master Redis Cluster (redis-cluster.ts). */
export type Backend = 'single' | 'cluster';
/**
 * What the suites written as `describe.each(BACKENDS)('on %s Redis', (backend) => …)` run on:
 * `SESSIOND_TEST_BACKENDS` (set by vitest.config.ts: `single` for `npm test`, `cluster` for
 * `npm run test:cluster`, both for `npm run test:all`).
 */
export const BACKENDS: readonly Backend[] = parseBackends(process.env.SESSIOND_TEST_BACKENDS ?? 'single,cluster');

function parseBackends(text: string): Backend[] {
  const names = text
    .split(',')
    .map((name) => name.trim())
    .filter(Boolean);
  const bad = names.find((name) => name !== 'single' && name !== 'cluster');
  if (bad !== undefined || names.length === 0)
    throw new Error(`SESSIOND_TEST_BACKENDS: '${text}' is not a list of single, cluster`);
  return names as Backend[];
}

/** A Redis connection factory for a test: every connection is closed by `closeAll`. */
export function connector(url: string) {
  const made: Redis[] = [];
  const connect = (role: string): Redis => {
    // A cluster through the production factory (an ioredis Cluster); one Redis as before.
    const redis = url.includes('+cluster://')
      ? createRedis(url, { role: `test:${role}`, maxRetriesPerRequest: null, log: () => undefined })
      : new Redis(url, { maxRetriesPerRequest: null, connectionName: `test:${role}`, lazyConnect: false });
    redis.on('error', () => undefined);
    made.push(redis);
    return redis;
  };
  return { connect, closeAll: () => made.forEach((r) => r.disconnect()) };
}

/** pi options that belong to a worker's host, pointing at a test PiEnv. */
export function piHostOptions(env: PiEnv, stateDir: string, sessionDir = env.sessionDir): Record<string, unknown> {
  return {
    command: piBin,
    agentDir: env.agentDir,
    sessionDir,
    extraArgs: NO_DISCOVERY,
    env: { ...env.env, SESSIOND_STATE_DIR: stateDir },
  };
}

export interface Harness {
  prefix: string;
  runtime: Runtime;
  connect: (role: string) => Redis;
  startWorker(overrides?: Partial<WorkerOptions>): Promise<SessionWorker>;
  stateDir: string;
  close(): Promise<void>;
}

/** What a runtime test file runs against: its own redis-server, the fake model server, a pi environment and a harness. */
export interface RuntimeSuite {
  /** On a cluster: its URL and stop(); the single-server controls (kill, restart, pause) throw. */
  redis: RedisServer;
  /** The cluster, on the cluster backend. */
  cluster?: RedisCluster;
  backend: Backend;
  server: FakeModelServer;
  env: PiEnv;
  h: Harness;
  /** A fresh temp dir (`sessiond-<name>-…`), removed after the file's tests, once its harness is closed. */
  tempDir(name: string): string;
  /** The environment a `sessiond` command of the test runs with: this Redis, pi's HOME, the harness's state dir, `prefix` (the harness's unless named). */
  cliEnv(prefix?: string): Record<string, string>;
}

/**
 * The setup the runtime test files share, as their beforeAll/afterAll: a fresh redis-server (with
 * AOF when asked), the fake model server with `scripts` set (their model ids known to pi), and a
 * harness on a prefix of its own. `bind` gets them once started (and may start more: a worker…);
 * after the file's tests `cleanup` runs first, then everything here is stopped and its temp dirs removed.
 */
export function useRuntimeSuite(
  name: string,
  options: { scripts?: Record<string, Script>; aof?: boolean; backend?: Backend; cleanup?: () => Promise<void> | void },
  bind: (suite: RuntimeSuite) => Promise<void> | void,
): void {
  let suite: Partial<RuntimeSuite> = {};
  const dirs: string[] = [];
  const tempDir = (dirName: string): string => {
    const dir = mkdtempSync(join(tmpdir(), `sessiond-${dirName}-`));
    dirs.push(dir);
    return dir;
  };
  const backend = options.backend ?? 'single';
  beforeAll(
    async () => {
      const target =
        backend === 'cluster'
          ? startRedisCluster(options.aof === true ? { aof: true } : {}).then((c) => ({
              redis: clusterAsServer(c),
              cluster: c,
            }))
          : startRedis(options.aof === true ? { aof: true } : {}).then((redis) => ({ redis }));
      const [started, server] = await Promise.all([target, startFakeModelServer()]);
      suite = { ...started, server, backend, tempDir };
      const redis = started.redis;
      const scripts = options.scripts ?? {};
      for (const [model, script] of Object.entries(scripts)) server.setScript(model, script);
      const env = createPiEnv({ serverUrl: server.url, extraModels: Object.keys(scripts) });
      suite.env = env;
      const h = harness(redis.url, env, name);
      suite.h = h;
      suite.cliEnv = (prefix = h.prefix) => ({
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: env.home,
        REDIS_URL: redis.url,
        SESSIOND_PREFIX: prefix,
        SESSIOND_STATE_DIR: h.stateDir,
      });
      await bind(suite as RuntimeSuite);
    },
    backend === 'cluster' ? 90_000 : undefined,
  );
  afterAll(async () => {
    try {
      await options.cleanup?.();
    } finally {
      await suite.h?.close();
      await suite.server?.close();
      await suite.redis?.stop();
      suite.env?.cleanup();
      for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
    }
  });
}

/** The tests' sessions run in temp dirs: the workspace of their deployment policy. */
export const TEST_POLICY = deploymentPolicy({ workspace: tmpdir() });

export const FAST_WORKER = {
  leaseTtlMs: 3000,
  stalledIntervalMs: 1000,
  holdBackoffMs: 1500,
  pollMs: 250,
  heartbeatMs: 1000,
} as const;

export function harness(url: string, env: PiEnv, name: string): Harness {
  const prefix = uniquePrefix(name);
  const { connect, closeAll } = connector(url);
  const runtime = new Runtime({ connect, prefix, policy: TEST_POLICY });
  const stateDir = mkdtempSync(join(tmpdir(), 'sessiond-state-'));
  const workers: SessionWorker[] = [];
  return {
    prefix,
    runtime,
    connect,
    stateDir,
    async startWorker(overrides = {}) {
      const keys = createKeys(prefix);
      const worker = new SessionWorker({
        connect,
        keys,
        queue: createSessionQueue(connect('worker-queue'), keys),
        ...WORKER_DEFAULTS,
        ...FAST_WORKER,
        concurrency: 2,
        agentOptions: { pi: piHostOptions(env, stateDir) },
        policy: TEST_POLICY,
        ...overrides,
      });
      await worker.start();
      workers.push(worker);
      return worker;
    },
    async close() {
      await Promise.all(workers.map((w) => w.close(2000)));
      await runtime.close();
      closeAll();
      rmSync(stateDir, { recursive: true, force: true });
    },
  };
}

export async function until<T>(
  probe: () => Promise<T | null | undefined | false>,
  timeoutMs = 60_000,
  what = 'condition',
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== null && value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The session once its turn `turn` has ended (completed, failed or cancelled). */
export function turnEnded(runtime: Runtime, sessionId: string, turn = 1, timeoutMs = 60_000): Promise<SessionRecord> {
  return until(
    async () => {
      const s = await runtime.getSession(sessionId);
      return s?.context?.turnIndex === turn && ['completed', 'failed', 'cancelled'].includes(s.state) ? s : null;
    },
    timeoutMs,
    `turn ${turn} of ${sessionId} to end`,
  );
}

/** An agent of this host with a live process, as its marker names it (found in /proc). */
export interface AgentRecord {
  marker: string;
  sessionId: string;
  workerPid: number;
  /** The agent process itself, when it is alive (its tools may outlive it). */
  pid: number | null;
  startTime: string | null;
}

/** The agents of this host that have a live process, optionally of one session. */
export async function agentRecords(sessionId?: string): Promise<AgentRecord[]> {
  return (await findAgentProcesses())
    .filter((a) => sessionId === undefined || a.sessionId === sessionId)
    .map((a) => ({
      marker: a.marker,
      sessionId: a.sessionId,
      workerPid: a.workerPid,
      pid: a.agent?.pid ?? null,
      startTime: a.agent?.startTime ?? null,
    }));
}

/** The message log is whole: seqs are exactly 1..n, in order, none twice. */
export function expectWholeLog(messages: readonly StoredMessage[]): void {
  const seqs = messages.map((m) => m.seq);
  const expected = seqs.map((_, i) => i + 1);
  if (JSON.stringify(seqs) !== JSON.stringify(expected))
    throw new Error(`message log has a gap or a duplicate seq: ${JSON.stringify(seqs)}`);
}

/** The assistant text of these messages, deltas joined. */
export function assistantText(messages: readonly StoredMessage[]): string {
  return messages
    .filter((m) => m.type === 'assistant')
    .map((m) => (m.content as { text?: string }).text ?? '')
    .join('');
}

/** Everything Redis holds for one session, for before/after comparisons ("nothing was written"). */
export async function sessionDump(redis: Redis, keys: Keys, sessionId: string): Promise<Record<string, unknown>> {
  const k = (part: Parameters<Keys['session']>[1]) => keys.session(sessionId, part);
  const [meta, snapshot, inbox, log, seq, lease, fence, cancel, history, agent, active] = await Promise.all([
    redis.hgetall(k('meta')),
    redis.get(k('snapshot')),
    redis.lrange(k('inbox'), 0, -1),
    redis.xrange(k('log'), '-', '+'),
    redis.get(k('seq')),
    redis.get(k('lease')),
    redis.get(k('fence')),
    redis.get(k('cancel')),
    redis.lrange(k('history'), 0, -1),
    redis.hgetall(k('agent')),
    redis.get(k('active')),
  ]);
  return { meta, snapshot, inbox, log, seq, lease, fence, cancel, history, agent, active };
}
