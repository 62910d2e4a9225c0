import { fileURLToPath } from 'node:url';
import { parseLimits, type LimitRule } from '../../src/runtime/limits/index.ts';
import { Runtime } from '../../src/runtime/runtime.ts';
import type { PiEnv } from './pi-env.ts';
import { piHostOptions, TEST_POLICY, type Harness } from './runtime.ts';

const HTTP_PI = fileURLToPath(new URL('../fixtures/agents/http-pi.sh', import.meta.url));

/** The deployment's runtime (what the CLI and HTTP API call) knowing these limits by name. */
export function runtimeWith(h: Harness, fleetLimits: readonly LimitRule[]): Runtime {
  return new Runtime({ connect: h.connect, prefix: h.prefix, policy: TEST_POLICY, fleetLimits });
}

/** Limit rules from their JSON, as `SESSIOND_LIMITS` gives them (a test's own are valid). */
export function rules(json: unknown): LimitRule[] {
  const parsed = parseLimits(json);
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.errors));
  return parsed.limits;
}

/** pi's host options with the cheap one-request agent (a shell script and curl) instead of pi. */
export function httpPi(env: PiEnv, h: Harness, modelUrl: string): Record<string, unknown> {
  const pi = piHostOptions(env, h.stateDir);
  return { ...pi, command: HTTP_PI, env: { ...(pi.env as Record<string, string>), FAKE_MODEL_URL: modelUrl } };
}
