import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { TOKEN_DEFAULTS } from '../../src/config/defaults.ts';
import { callerIssues, PRIORITY_RANGE, tokenLimits } from '../../src/config/tokens.ts';
import { MAX_PRIORITY, MIN_PRIORITY } from '../../src/runtime/queue.ts';

const sha = (t: string) => createHash('sha256').update(t).digest('hex');
const tokens = (list: unknown) => ({ SESSIOND_API_TOKENS: JSON.stringify(list) });

describe('token entries: tenant, maxPriority, maxSessions, maxStreams', () => {
  it('an entry of {name, scope, sha256} only still loads; the defaults are its name as tenant, priority 0 and the default caps', () => {
    const config = loadConfig({}, tokens([{ name: 'ci', scope: 'write', sha256: sha('t') }]));
    expect(config.http.tokens).toEqual([{ name: 'ci', scope: 'write', sha256: sha('t') }]);
    expect(tokenLimits(config.http.tokens[0]!)).toEqual({
      tenant: 'ci',
      maxPriority: 0,
      maxSessions: TOKEN_DEFAULTS.maxSessions,
      maxStreams: TOKEN_DEFAULTS.maxStreams,
    });
    const named = loadConfig(
      {},
      tokens([
        {
          name: 'ci',
          scope: 'write',
          sha256: sha('t'),
          tenant: 'acme',
          maxPriority: 50,
          maxSessions: 3,
          maxStreams: 4,
        },
      ]),
    );
    expect(tokenLimits(named.http.tokens[0]!)).toEqual({
      tenant: 'acme',
      maxPriority: 50,
      maxSessions: 3,
      maxStreams: 4,
    });
  });

  it('a bad field is a start-up error naming it', () => {
    expect(() => loadConfig({}, tokens([{ name: 'ci', scope: 'write', sha256: sha('t'), tenant: 'a b' }]))).toThrow(
      /http\.tokens\.0\.tenant: must be 1-100 letters/,
    );
    expect(() => loadConfig({}, tokens([{ name: 'ci', scope: 'write', sha256: sha('t'), maxPriority: 1001 }]))).toThrow(
      /http\.tokens\.0\.maxPriority: must be an integer from -1000 to 1000/,
    );
    expect(() => loadConfig({}, tokens([{ name: 'ci', scope: 'write', sha256: sha('t'), maxSessions: 0 }]))).toThrow(
      /http\.tokens\.0\.maxSessions: must be an integer from 1/,
    );
    expect(() => loadConfig({}, { SESSIOND_TENANT: 'a/b' })).toThrow(
      /caller\.tenant: must be 1-100 letters.*SESSIOND_TENANT/,
    );
    expect(() => loadConfig({}, { SESSIOND_MAX_PRIORITY: '5000' })).toThrow(
      /caller\.maxPriority: must be an integer from -1000 to 1000.*SESSIOND_MAX_PRIORITY/,
    );
    expect(loadConfig({}, { SESSIOND_TENANT: 'acme', SESSIOND_MAX_PRIORITY: '-3' }).caller).toEqual({
      tenant: 'acme',
      maxPriority: -3,
    });
  });

  it('the tokens config and the activation queue agree on the priority range', () => {
    expect(PRIORITY_RANGE).toEqual({ min: MIN_PRIORITY, max: MAX_PRIORITY });
  });
});

describe('callerIssues', () => {
  const caller = { tenant: 'acme', maxPriority: 10 };
  it('nothing claimed, or the caller’s own: no issue', () => {
    expect(callerIssues(caller, {})).toEqual([]);
    expect(callerIssues(caller, { tenant: 'acme', priority: 10 })).toEqual([]);
    expect(callerIssues(caller, { priority: -1000 })).toEqual([]);
  });
  it('another tenant and a higher priority: one issue each, naming the field', () => {
    expect(callerIssues(caller, { tenant: 'globex', priority: 11 }).map((i) => i.field)).toEqual([
      'tenant',
      'priority',
    ]);
  });
});
