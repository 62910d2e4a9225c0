import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadConfig, workspaceConfig } from '../../src/config/config.ts';
import { deploymentPolicy } from '../../src/runtime/deployment-policy.ts';
import { REPO_ROOT } from '../support/pi-env.ts';

/**
 * docker-compose.yml is for users (no Docker here): its sessiond services' settings are read as the
 * image would run them (the Dockerfile's ENV, compose's `${VAR:-default}` filled in) and checked
 * with sessiond's own configuration rules, and their paths against what each service mounts.
 */

interface Service {
  build?: string;
  command?: string[];
  environment?: Record<string, string | number>;
  volumes?: string[];
  healthcheck?: { test: string[] };
  depends_on?: Record<string, unknown>;
  profiles?: string[];
}

const compose = parse(readFileSync(join(REPO_ROOT, 'docker-compose.yml'), 'utf8')) as {
  services: Record<string, Service>;
};
const dockerfile = readFileSync(join(REPO_ROOT, 'Dockerfile'), 'utf8');
const imageEnv = Object.fromEntries([...dockerfile.matchAll(/^ENV (\w+)=(\S+)$/gm)].map((m) => [m[1], m[2]]));

const shell = { SESSIOND_API_TOKEN: 'a-token-of-at-least-16-chars', PATH: '/usr/bin:/bin' };

/** Compose's `${VAR}`, `${VAR:-default}` and `${VAR:?message}` filled in from `vars`. */
function fill(value: string, vars: Record<string, string>): string {
  return value.replace(/\$\{(\w+)(?::-([^}]*)|:\?[^}]*)?\}/g, (_, name: string, fallback?: string) => {
    const set = vars[name];
    if (set !== undefined) return set;
    if (fallback !== undefined) return fallback;
    throw new Error(`\${${name}} is required and not set`);
  });
}

/** A service's environment as its container sees it (the image's ENV, then the service's). */
function envOf(service: Service, vars: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = { ...imageEnv };
  for (const [name, value] of Object.entries(service.environment ?? {})) env[name] = fill(String(value), vars);
  return env;
}

/** The container side of each volume. */
const mounts = (service: Service) => (service.volumes ?? []).map((v) => fill(v, shell).split(':')[1] ?? '');
const under = (path: string, root: string) => path === root || path.startsWith(`${root}/`);

const sessiond = Object.entries(compose.services).filter(([, s]) => s.build === '.');

describe('docker-compose.yml', () => {
  it('has a worker and an API per profile, each built from this image', () => {
    expect(sessiond.map(([name]) => name).sort()).toEqual(['api', 'api-cluster', 'worker', 'worker-cluster']);
  });

  it.each(sessiond.map(([name]) => [name]))('%s: its settings pass the configuration check', (name) => {
    const service = compose.services[name]!;
    const env = envOf(service, shell);
    const config = loadConfig({}, env);
    expect(config.stateDir).toBe('/var/lib/sessiond');
    const policy = deploymentPolicy(config);
    expect(policy.workspace).toBe('/workspace');
    expect(policy.workspaceRoots).toEqual(['/workspace']);
    const redisHosts = [...(env.REDIS_URL ?? '').matchAll(/(?:\/\/|,)([\w-]+):\d+/g)].map((m) => m[1]);
    expect(redisHosts.length).toBeGreaterThan(0);
    for (const host of redisHosts) expect(Object.keys(compose.services)).toContain(host);
  });

  it.each([['worker'], ['worker-cluster']])(
    '%s: its state dir and workspace are mounted, its agents get the keys',
    (name) => {
      const service = compose.services[name]!;
      const env = envOf(service, { ...shell, ANTHROPIC_API_KEY: 'sk-test' });
      const config = loadConfig({}, env);
      expect(mounts(service).some((m) => under(config.stateDir, m))).toBe(true);
      expect(mounts(service)).toContain('/workspace');
      expect(mounts(service)).toContain(env.SESSIOND_PI_AGENT_DIR);
      expect(config.agentEnv).toEqual(['ANTHROPIC_API_KEY', 'OPENAI_API_KEY', 'GEMINI_API_KEY']);
      for (const key of config.agentEnv) expect(Object.keys(service.environment ?? {})).toContain(key);
      expect(env.ANTHROPIC_API_KEY).toBe('sk-test');
    },
  );

  it.each([['api'], ['api-cluster']])(
    '%s: healthy when /readyz says ready; the same workspace as the workers',
    (name) => {
      const service = compose.services[name]!;
      expect(service.healthcheck?.test.join(' ')).toContain('http://127.0.0.1:7420/readyz');
      expect(service.command).toEqual(['serve', '--host', '0.0.0.0', '--port', '7420']);
      const worker = compose.services[name === 'api' ? 'worker' : 'worker-cluster']!;
      expect(envOf(service, shell).SESSIOND_WORKSPACE).toBe(envOf(worker, shell).SESSIOND_WORKSPACE);
      expect(envOf(service, shell).REDIS_URL).toBe(envOf(worker, shell).REDIS_URL);
    },
  );

  it.each([
    ['worker', 'api'],
    ['worker-cluster', 'api-cluster'],
  ])('%s and %s: workspaces on, one store on a shared named volume (sessions move between workers)', (...names) => {
    const stores = names.map((name) => {
      const service = compose.services[name]!;
      const ws = workspaceConfig(loadConfig({}, envOf(service, shell)));
      expect(ws).not.toBeNull();
      // The store lies on a named volume (shared by every replica), not in the container's own state dir.
      const volume = (service.volumes ?? []).find((v) => ws !== null && under(ws.store, v.split(':')[1] ?? '/'));
      expect(volume?.split(':')[0]).toBe('workspace-store');
      expect(under(ws?.store ?? '', '/var/lib/sessiond')).toBe(false);
      return ws?.store;
    });
    expect(new Set(stores).size).toBe(1);
  });
});
