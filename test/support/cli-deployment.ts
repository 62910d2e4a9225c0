import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ResultPromise } from 'execa';
import { sessiond } from './cli.ts';
import { startFakeModelServer, type FakeModelServer } from './fake-model-server.ts';
import { createPiEnv, NO_DISCOVERY, piBin, type PiEnv } from './pi-env.ts';
import { startRedis, uniquePrefix, type RedisServer } from './redis.ts';
import { AGENT_ENV_NAMES } from './worker-process.ts';

/** What the CLI tests run against: a real redis-server, the fake model API, pi's environment and a `sessiond worker` process. */
export interface CliDeployment {
  redis: RedisServer;
  server: FakeModelServer;
  env: PiEnv;
  stateDir: string;
  /** The environment every `sessiond` of the test runs with (the worker's too). */
  cliEnv: Record<string, string>;
  /** `--provider fake --model M --cwd <pi's cwd>`: a turn of the fake model's script M. */
  model(m: string): string[];
  stop(): Promise<void>;
}

/** Starts a deployment for the CLI tests: its own prefix (`name`), short leases and polls, a worker with 2 slots. */
export async function startCliDeployment(name: string): Promise<CliDeployment> {
  const [redis, server] = await Promise.all([startRedis(), startFakeModelServer()]);
  const env = createPiEnv({ serverUrl: server.url });
  const stateDir = mkdtempSync(join(tmpdir(), `sessiond-${name}-`));
  const cliEnv = {
    ...env.env,
    PATH: process.env.PATH ?? '',
    REDIS_URL: redis.url,
    SESSIOND_PREFIX: uniquePrefix(name),
    SESSIOND_STATE_DIR: stateDir,
    SESSIOND_PI_COMMAND: piBin,
    SESSIOND_PI_AGENT_DIR: env.agentDir,
    SESSIOND_PI_SESSION_DIR: env.sessionDir,
    SESSIOND_PI_ARGS: JSON.stringify(NO_DISCOVERY),
    SESSIOND_LEASE_TTL: '3s',
    SESSIOND_STALLED_INTERVAL: '1s',
    SESSIOND_POLL: '250ms',
    SESSIOND_HEARTBEAT: '1s',
    SESSIOND_LOG_LEVEL: 'warn',
    SESSIOND_WORKSPACE: tmpdir(),
    SESSIOND_AGENT_ENV: AGENT_ENV_NAMES.join(','),
  };
  const worker: ResultPromise = sessiond(['worker', '--concurrency', '2'], { env: cliEnv });
  worker.catch(() => undefined);
  return {
    redis,
    server,
    env,
    stateDir,
    cliEnv,
    model: (m) => ['--provider', 'fake', '--model', m, '--cwd', env.cwd],
    async stop() {
      worker.kill('SIGTERM');
      await worker.catch(() => undefined);
      await server.close();
      await redis.stop();
      env.cleanup();
      rmSync(stateDir, { recursive: true, force: true });
    },
  };
}
