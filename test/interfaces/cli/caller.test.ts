import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKeys } from '../../../src/runtime/keys.ts';
import { runCli } from '../../support/cli.ts';
import { startRedis, uniquePrefix, type RedisServer } from '../../support/redis.ts';

/**
 * The CLI's tenant and highest priority are its configuration's (`caller`, SESSIOND_TENANT and
 * SESSIOND_MAX_PRIORITY; issue 25): a flag may not claim another tenant or a higher priority
 * (exit 2 naming the flag, nothing written); an omitted --tenant is the configured one.
 */

let redis: RedisServer;
let client: Redis;
let stateDir: string;
const prefix = uniquePrefix('cli-caller');

beforeAll(async () => {
  redis = await startRedis();
  client = new Redis(redis.url);
  stateDir = mkdtempSync(join(tmpdir(), 'sessiond-cli-caller-'));
});

afterAll(async () => {
  client?.disconnect();
  await redis?.stop();
  rmSync(stateDir, { recursive: true, force: true });
});

const env = (more: Record<string, string> = {}) => ({
  PATH: process.env.PATH ?? '',
  REDIS_URL: redis.url,
  SESSIOND_PREFIX: prefix,
  SESSIOND_STATE_DIR: stateDir,
  ...more,
});
const tenantOf = (id: string) => client.hget(createKeys(prefix).session(id, 'meta'), 'tenant');

describe('sessiond enqueue: tenant and priority from the configuration', () => {
  it('an omitted --tenant is the configured one (default local); another is exit 2 naming --tenant; a priority above caller.maxPriority is exit 2 naming --priority', async () => {
    const plain = await runCli(['enqueue', '--session', 'cli-default', 'hi'], { env: env() });
    expect(plain.exitCode).toBe(0);
    expect(await tenantOf('cli-default')).toBe('local');

    const acme = env({ SESSIOND_TENANT: 'acme', SESSIOND_MAX_PRIORITY: '5' });
    expect((await runCli(['enqueue', '--session', 'cli-acme', '--priority', '5', 'hi'], { env: acme })).exitCode).toBe(
      0,
    );
    expect(await tenantOf('cli-acme')).toBe('acme');

    const other = await runCli(['enqueue', '--session', 'cli-other', '--tenant', 'globex', 'hi'], { env: acme });
    expect(other.exitCode).toBe(2);
    expect(other.stderr).toMatch(/--tenant: this credential's tenant is "acme"/);
    const high = await runCli(['enqueue', '--session', 'cli-high', '--priority', '1000', 'hi'], { env: acme });
    expect(high.exitCode).toBe(2);
    expect(high.stderr).toMatch(/--priority: must be at most 5/);
    // enqueue and schedule add read their turn options from the same flags: --ref without --repo is refused by both.
    for (const args of [
      ['enqueue', '--session', 'cli-ref', '--ref', 'main', 'hi'],
      ['schedule', 'add', '--every', '1h', '--session', 'cli-ref', '--ref', 'main', 'hi'],
    ]) {
      const refOnly = await runCli(args, { env: acme });
      expect(refOnly.exitCode, args.join(' ')).toBe(2);
      expect(refOnly.stderr).toContain('--ref: goes with --repo');
    }
    expect(
      await client.exists(
        createKeys(prefix).session('cli-other', 'meta'),
        createKeys(prefix).session('cli-high', 'meta'),
        createKeys(prefix).session('cli-ref', 'meta'),
      ),
    ).toBe(0);
  });
});
