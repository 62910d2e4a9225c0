import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, sessiond } from '../../support/cli.ts';
import { startRedis, uniquePrefix, type RedisServer } from '../../support/redis.ts';

/** `sessiond serve` as a user runs it: a separate process through the package's bin. */

let redis: RedisServer;

beforeAll(async () => {
  redis = await startRedis();
});

afterAll(async () => {
  await redis?.stop();
});

const baseEnv = () => ({ PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', REDIS_URL: redis.url, SESSIOND_PREFIX: uniquePrefix('serve'), SESSIOND_LOG_LEVEL: 'warn' });

describe('sessiond serve', () => {
  it('serves on 127.0.0.1, answers, and exits 0 on SIGTERM', async () => {
    const child = sessiond(['serve', '--port', '0'], { env: baseEnv() });
    const url = await new Promise<string>((resolve, reject) => {
      let seen = '';
      child.stderr?.on('data', (chunk: Buffer) => {
        seen += chunk.toString('utf8');
        const match = /serving (http:\/\/127\.0\.0\.1:\d+)/.exec(seen);
        if (match?.[1] !== undefined) resolve(match[1]);
      });
      void child.then(() => reject(new Error(`serve exited early:\n${seen}`)));
    });
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    const ready = await fetch(`${url}/readyz`);
    expect(ready.status).toBe(503);
    expect(await ready.json()).toMatchObject({ reason: 'no worker has ever sent a heartbeat' });
    expect((await fetch(`${url}/`)).headers.get('content-type')).toMatch(/text\/html/);
    child.kill('SIGTERM');
    const result = await child;
    expect(result.exitCode).toBe(0);
  });

  it('refuses to bind anywhere but loopback without a token (exit 2), and never prints the token', async () => {
    const refused = await runCli(['serve', '--host', '0.0.0.0', '--port', '0'], { env: baseEnv() });
    expect(refused.exitCode).toBe(2);
    expect(refused.stderr).toMatch(/without an API token.*SESSIOND_API_TOKEN/);

    const badPort = await runCli(['serve', '--port', '70000'], { env: baseEnv() });
    expect(badPort.exitCode).toBe(2);
    expect(badPort.stderr).toMatch(/--port must be an integer from 0 to 65535/);

    const shortToken = await runCli(['serve', '--host', '0.0.0.0', '--port', '0'], { env: { ...baseEnv(), SESSIOND_API_TOKEN: 'tiny-secret' } });
    expect(shortToken.exitCode).toBe(2);
    expect(shortToken.stderr).toMatch(/http\.token: must be at least 16 characters/);
    expect(shortToken.stderr).not.toContain('tiny-secret');
  });
});
