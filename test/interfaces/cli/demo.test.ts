import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../support/cli.ts';
import { livePidsMatching } from '../../support/processes.ts';
import { startRedis, uniquePrefix, type RedisServer } from '../../support/redis.ts';

let redis: RedisServer;
let stateDir: string;

beforeAll(async () => {
  redis = await startRedis();
  stateDir = mkdtempSync(join(tmpdir(), 'sessiond-demo-'));
});

afterAll(async () => {
  await redis.stop();
  rmSync(stateDir, { recursive: true, force: true });
});

describe("sessiond demo (the README's main command)", () => {
  it('runs real pi sessions offline through the queue: streaming, a tool call, a retried failure, a non-retryable one, a cancel', async () => {
    const env = {
      PATH: process.env.PATH ?? '',
      HOME: stateDir,
      REDIS_URL: redis.url,
      SESSIOND_PREFIX: uniquePrefix('demo'),
      SESSIOND_STATE_DIR: stateDir,
      SESSIOND_LOG_LEVEL: 'warn',
    };
    const result = await runCli(['demo'], { env });
    expect(result.exitCode, result.stdout + result.stderr).toBe(0);
    const out = result.stdout;
    expect(out).toContain("sessiond streams the agent's answer");
    expect(out).toMatch(/✓ bash .*hello from a tool call/);
    expect(out).toContain('attempt 1 failed (server_error)');
    expect(out).toContain('attempt 1 failed (auth)');
    expect(out).toContain('turn 1: cancelled');
    expect(out.match(/^ {2}ok /gm)).toHaveLength(5);
    expect(out).toContain('npx sessiond inspect demo-');
    expect(out).toContain('http://127.0.0.1:7420/');
    expect(out).toContain('npx sessiond doctor');
    expect(out).toContain(`Redis: ${redis.url}/0 (REDIS_URL), left as it was.`);
    // The cancelled long tool left nothing behind.
    const inspect = await runCli(['list', '--json'], { env });
    expect(JSON.parse(inspect.stdout)).toHaveLength(5);
    expect(livePidsMatching(/sleep 60[01]/)).toEqual([]);
  });
});
