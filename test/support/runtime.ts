import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { Runtime } from '../../src/runtime/runtime.ts';
import { SessionWorker, WORKER_DEFAULTS, type WorkerOptions } from '../../src/runtime/worker.ts';
import { createSessionQueue } from '../../src/runtime/queue.ts';
import { createKeys } from '../../src/runtime/keys.ts';
import type { PiEnv } from './pi-env.ts';
import { piBin } from './pi-env.ts';
import { uniquePrefix } from './redis.ts';

export const NO_DISCOVERY = ['--no-extensions', '--no-skills', '--no-prompt-templates', '--no-context-files'];

/** A Redis connection factory for a test: every connection is closed by `closeAll`. */
export function connector(url: string) {
  const made: Redis[] = [];
  const connect = (role: string): Redis => {
    const redis = new Redis(url, { maxRetriesPerRequest: null, connectionName: `test:${role}`, lazyConnect: false });
    redis.on('error', () => undefined);
    made.push(redis);
    return redis;
  };
  return { connect, closeAll: () => made.forEach((r) => r.disconnect()) };
}

/** pi options that belong to a worker's host, pointing at a test PiEnv. */
export function piHostOptions(env: PiEnv, stateDir: string, sessionDir = env.sessionDir): Record<string, unknown> {
  return { command: piBin, agentDir: env.agentDir, sessionDir, extraArgs: NO_DISCOVERY, env: { ...env.env, SESSIOND_STATE_DIR: stateDir } };
}

export interface Harness {
  prefix: string;
  runtime: Runtime;
  connect: (role: string) => Redis;
  startWorker(overrides?: Partial<WorkerOptions>): Promise<SessionWorker>;
  stateDir: string;
  close(): Promise<void>;
}

export const FAST_WORKER = { leaseTtlMs: 3000, stalledIntervalMs: 1000, holdBackoffMs: 1500, pollMs: 250, heartbeatMs: 1000 } as const;

export function harness(url: string, env: PiEnv, name: string): Harness {
  const prefix = uniquePrefix(name);
  const { connect, closeAll } = connector(url);
  const runtime = new Runtime({ connect, prefix });
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

export async function until<T>(probe: () => Promise<T | null | undefined | false>, timeoutMs = 60_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== null && value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
