/**
 * The environment an agent runs with is built from an allow-list, never inherited: a small base
 * of the worker's own variables that say how the host works (no secrets), then what the operator
 * configured for that agent (its API key, variables named explicitly). No `SESSIOND_*` variable
 * ever reaches an agent (the tree marker aside, which spawnAgent adds itself).
 */
const BASE_NAMES = new Set([
  'PATH',
  'HOME',
  'USER',
  'LOGNAME',
  'SHELL',
  'LANG',
  'LANGUAGE',
  'TERM',
  'COLORTERM',
  'NO_COLOR',
  'TMPDIR',
  'TZ',
]);
const BASE_PATTERN = /^(LC_[A-Z_]+|XDG_(CONFIG|CACHE|DATA|STATE|RUNTIME)_(HOME|DIR))$/;

/** Variables of sessiond itself: they name its Redis, its tokens, its config and every agent's options. */
export const SESSIOND_ENV = /^SESSIOND_/;

export function isBaseEnvName(name: string): boolean {
  return BASE_NAMES.has(name) || BASE_PATTERN.test(name);
}

/** The base of the worker's environment an agent may see (`PATH`, `HOME`, `LANG`/`LC_*`, `TERM`, `TMPDIR`, `TZ`…). */
export function baseEnv(source: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(source)) if (value !== undefined && isBaseEnvName(name)) env[name] = value;
  return env;
}

/** `names` taken from `source` (the variables an operator passes through by name); absent ones are skipped. */
export function pickEnv(names: readonly string[], source: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of names) {
    const value = source[name];
    if (value !== undefined && !SESSIOND_ENV.test(name)) env[name] = value;
  }
  return env;
}

/** What is left of `env` for the agent process itself: every `SESSIOND_*` entry removed. */
export function withoutSessiondEnv(env: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) if (!SESSIOND_ENV.test(name)) out[name] = value;
  return out;
}
