import { describe, expect, it } from 'vitest';
import { PolicyError, PolicySchema, resolvePolicy, type PermissionKnobs } from '../../src/policy/index.ts';
import { loadConfig } from '../../src/config/config.ts';

const KNOBS: Record<string, PermissionKnobs> = { pi: {}, codex: {} };
const policy = (input: Record<string, unknown>) => resolvePolicy(PolicySchema.parse(input), KNOBS, '/tmp');

describe('policy.network', () => {
  it('no network section: attempts may reach nothing but their model host', () => {
    expect(policy({}).network).toEqual({ pi: [], codex: [] });
  });

  it('allow holds for every agent, agents.<name>.allow adds to it for that agent only', () => {
    const p = policy({
      network: {
        allow: ['registry.npmjs.org'],
        agents: { pi: { allow: ['*.pypi.org', '10.0.0.5:8080', '[::1]:8443'] } },
      },
    });
    expect(p.network.codex).toEqual([{ host: 'registry.npmjs.org', port: null }]);
    expect(p.network.pi).toEqual([
      { host: 'registry.npmjs.org', port: null },
      { host: '*.pypi.org', port: null },
      { host: '10.0.0.5', port: 8080 },
      { host: '::1', port: 8443 },
    ]);
  });

  it('a malformed pattern is refused naming the field and the pattern', () => {
    for (const [bad, why] of [
      ['https://example.com', /not a URL/],
      ['example.com:99999', /port must be 1-65535/],
      ['*.com', /wildcard needs a domain of at least two labels/],
      ['ex ample.com', /not a URL/],
      ['::1', /IPv6 address goes in brackets/],
      ['exa*mple.com', /not a host name/],
    ] as const) {
      const result = PolicySchema.safeParse({ network: { allow: ['ok.example', bad] } });
      expect(result.success, bad).toBe(false);
      const issue = result.error!.issues[0]!;
      expect(issue.path).toEqual(['network', 'allow', 1]);
      expect(issue.message).toMatch(why);
    }
  });

  it('an unknown agent under network.agents is refused by name', () => {
    expect(() => policy({ network: { agents: { ghost: { allow: ['a.example'] } } } })).toThrow(PolicyError);
    expect(() => policy({ network: { agents: { ghost: { allow: ['a.example'] } } } })).toThrow(
      /policy.network.agents.ghost: unknown agent/,
    );
  });

  it('the configuration error names policy.network.allow', () => {
    expect(() => loadConfig({}, { SESSIOND_POLICY: JSON.stringify({ network: { allow: ['http://x'] } }) })).toThrow(
      /policy\.network\.allow\.0/,
    );
  });
});
