import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../../src/config/config.ts';
import { limitKeysFor, parseLimits } from '../../../src/runtime/limits/index.ts';

describe('fleet limits configuration', () => {
  it('names each limit by its match when the operator gave no name, and keys `*` limits per distinct value', () => {
    const parsed = parseLimits(
      '[{"match":{"provider":"anthropic"},"maxConcurrent":20},{"match":{"tenant":"*"},"maxConcurrent":4},{"name":"gpt","match":{"account":"team-a","model":"gpt-5"},"maxStartsPerMinute":60}]',
    );
    if (!parsed.ok) throw new Error(JSON.stringify(parsed.errors));
    expect(parsed.limits.map((l) => l.name)).toEqual(['provider=anthropic', 'tenant=*', 'gpt']);
    expect(
      limitKeysFor(parsed.limits, { agent: 'pi', provider: 'anthropic', tenant: 'acme' }).map((k) => k.key),
    ).toEqual(['provider=anthropic', 'tenant=*|tenant=acme']);
    // No tenant: not under the per-tenant limit; another account: not under `gpt`.
    expect(limitKeysFor(parsed.limits, { agent: 'pi', provider: 'openai', model: 'gpt-5', account: 'team-b' })).toEqual(
      [],
    );
    expect(
      limitKeysFor(parsed.limits, { agent: 'pi', model: 'gpt-5', account: 'team-a' }).map((k) => [
        k.name,
        k.maxStartsPerMinute,
      ]),
    ).toEqual([['gpt', 60]]);
  });

  it('refuses a bad limit with an error naming the field, from SESSIOND_LIMITS or the config file', () => {
    expect(parseLimits([{ match: { model: 'x' } }])).toEqual({
      ok: false,
      errors: [
        {
          field: 'limits.0.maxConcurrent',
          message: 'a limit needs maxConcurrent, maxStartsPerMinute and/or maxTokensPerMinute',
        },
      ],
    });
    expect(parseLimits([{ match: {}, maxTokensPerMinute: 0.5 }])).toMatchObject({
      ok: false,
      errors: [{ field: 'limits.0.maxTokensPerMinute', message: 'must be an integer from 1 to 1000000000' }],
    });
    expect(parseLimits([{ match: { modle: 'x' }, maxConcurrent: 1 }])).toMatchObject({
      ok: false,
      errors: [{ field: 'limits.0.match' }],
    });
    expect(
      parseLimits([
        { name: 'a', maxConcurrent: 1 },
        { name: 'a', maxConcurrent: 2 },
      ]),
    ).toMatchObject({ ok: false, errors: [{ field: 'limits.1.name' }] });
    expect(parseLimits('not json')).toMatchObject({ ok: false, errors: [{ field: 'limits' }] });
    expect(() => loadConfig({}, { SESSIOND_LIMITS: '[{"match":{},"maxConcurrent":0}]' })).toThrow(ConfigError);
    expect(() => loadConfig({}, { SESSIOND_LIMITS: '[{"match":{},"maxConcurrent":0}]' })).toThrow(
      /limits\.0\.maxConcurrent: must be an integer from 1 to 100000 \(env SESSIOND_LIMITS\)/,
    );
    expect(loadConfig({}, { SESSIOND_LIMITS: '[{"match":{"tenant":"*"},"maxConcurrent":4}]' }).limits).toEqual([
      { name: 'tenant=*', match: { tenant: '*' }, maxConcurrent: 4, maxStartsPerMinute: 0, maxTokensPerMinute: 0 },
    ]);
  });
});
