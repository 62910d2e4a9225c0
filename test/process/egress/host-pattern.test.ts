import { describe, expect, it } from 'vitest';
import {
  matchesHost,
  parseAuthority,
  swapKey,
  withKeyQuery,
  PLACEHOLDER_KEY,
} from '../../../src/process/egress/index.ts';
import { hostPattern as p } from '../../support/egress.ts';

describe('host patterns', () => {
  it('a name without a port allows 443 and 80 only, case and a trailing dot aside', () => {
    expect(matchesHost(p('Registry.NPMjs.org'), 'registry.npmjs.org', 443)).toBe(true);
    expect(matchesHost(p('registry.npmjs.org'), 'REGISTRY.npmjs.org.', 80)).toBe(true);
    expect(matchesHost(p('registry.npmjs.org'), 'registry.npmjs.org', 22)).toBe(false);
    expect(matchesHost(p('registry.npmjs.org'), 'evil-registry.npmjs.org', 443)).toBe(false);
  });

  it('a wildcard allows subdomains, not the domain itself nor a look-alike', () => {
    expect(matchesHost(p('*.pypi.org'), 'files.pypi.org', 443)).toBe(true);
    expect(matchesHost(p('*.pypi.org'), 'a.b.pypi.org', 443)).toBe(true);
    expect(matchesHost(p('*.pypi.org'), 'pypi.org', 443)).toBe(false);
    expect(matchesHost(p('*.pypi.org'), 'evilpypi.org', 443)).toBe(false);
  });

  it('a port, an IPv4 address and a bracketed IPv6 address match exactly', () => {
    expect(matchesHost(p('10.0.0.5:8080'), '10.0.0.5', 8080)).toBe(true);
    expect(matchesHost(p('10.0.0.5:8080'), '10.0.0.5', 443)).toBe(false);
    expect(matchesHost(p('[::1]:8443'), '[::1]', 8443)).toBe(true);
    expect(matchesHost(p('[::1]:8443'), '::1', 8443)).toBe(true);
  });

  it('CONNECT authorities: host:port and [v6]:port; anything else is malformed', () => {
    expect(parseAuthority('example.com:443')).toEqual({ host: 'example.com', port: 443 });
    expect(parseAuthority('[::1]:8443')).toEqual({ host: '::1', port: 8443 });
    for (const bad of ['example.com', 'example.com:0', 'example.com:70000', 'http://x:1', 'a b:1', ''])
      expect(parseAuthority(bad), bad).toBeNull();
  });
});

describe('the model bridge key swap', () => {
  it('replaces only the placeholder, as it was sent (bare or Bearer); anything else is dropped (null)', () => {
    expect(swapKey(PLACEHOLDER_KEY, 'real')).toBe('real');
    expect(swapKey(`Bearer ${PLACEHOLDER_KEY}`, 'real')).toBe('Bearer real');
    expect(swapKey(`bearer ${PLACEHOLDER_KEY}`, 'real')).toBe('bearer real');
    expect(swapKey('Bearer someone-elses-key', 'real')).toBeNull();
    expect(swapKey('', 'real')).toBeNull();
  });

  it('a key= query parameter: the placeholder is swapped, another value removed; only origin-form paths pass', () => {
    expect(withKeyQuery(`/v1beta/models/m:generate?key=${PLACEHOLDER_KEY}&alt=sse`, 'real')).toBe(
      '/v1beta/models/m:generate?key=real&alt=sse',
    );
    expect(withKeyQuery('/v1/x?key=other&alt=sse', 'real')).toBe('/v1/x?alt=sse');
    expect(withKeyQuery('/v1/x?alt=sse', 'real')).toBe('/v1/x?alt=sse');
    expect(withKeyQuery('http://evil.example/steal', 'real')).toBeNull();
    expect(withKeyQuery('//evil.example/steal', 'real')).toBeNull();
  });
});
