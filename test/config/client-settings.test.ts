import { describe, expect, it } from 'vitest';
import { clientSettingsOf, plainClientSettings } from '../../src/config/client-settings.ts';
import { loadConfig } from '../../src/config/config.ts';
import { rawConfig } from '../../src/config/raw.ts';

// What a client command reads, the fast way and through the whole schema, for the same environment.
function both(env: NodeJS.ProcessEnv): {
  plain: ReturnType<typeof plainClientSettings>;
  whole: () => ReturnType<typeof clientSettingsOf>;
} {
  return { plain: plainClientSettings(rawConfig({}, env)), whole: () => clientSettingsOf(loadConfig({}, env)) };
}

describe('the client settings of a plain configuration', () => {
  it.each([
    ['nothing set', {}],
    ['a Redis URL', { REDIS_URL: 'redis://127.0.0.1:6380/2' }],
    ['a cluster URL', { REDIS_URL: 'redis+cluster://127.0.0.1:7000,127.0.0.1:7001' }],
    ['a prefix', { SESSIOND_PREFIX: 'team-a.prod_1' }],
    ['a state dir', { SESSIOND_STATE_DIR: '/var/lib/sessiond' }],
    [
      'all of them',
      { REDIS_URL: 'redis://h:6379', SESSIOND_PREFIX: 'p', SESSIOND_STATE_DIR: '/s', SESSIOND_LOG_LEVEL: 'silent' },
    ],
  ])('are what the whole schema gives (%s)', (_name, env: NodeJS.ProcessEnv) => {
    const { plain, whole } = both(env);
    expect(plain).not.toBeNull();
    expect(plain).toEqual(whole());
  });

  it.each([
    ['a bad prefix', { SESSIOND_PREFIX: 'has space' }, /prefix: must be 1-64 letters/],
    ['a bad Redis URL', { REDIS_URL: 'http://example' }, /redisUrl/],
  ])('are left to the schema, which names the field, for %s', (_name, env: NodeJS.ProcessEnv, message) => {
    const { plain, whole } = both(env);
    expect(plain).toBeNull();
    expect(whole).toThrow(message);
  });

  it.each([
    ['queue partitions', { SESSIOND_QUEUE_PARTITIONS: '4' }],
    ['fleet limits', { SESSIOND_LIMITS: '[{"match":{"provider":"*"},"maxConcurrent":2}]' }],
    ['a retention', { SESSIOND_RETENTION: '7d' }],
    ['a worker setting', { SESSIOND_CONCURRENCY: '3' }],
  ])('are read through the schema when the configuration names more (%s)', (_name, env: NodeJS.ProcessEnv) => {
    expect(both(env).plain).toBeNull();
  });
});
