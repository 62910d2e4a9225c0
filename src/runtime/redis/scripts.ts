import type { Redis } from 'ioredis';

export type ScriptFn = (...args: Array<string | number>) => Promise<unknown>;

/**
 * A Lua script as a command of this connection (defined on first use; EVALSHA, falling back to
 * EVAL). Without `numberOfKeys`, the first argument of each call is the number of keys.
 */
export function script(redis: Redis, name: string, lua: string, numberOfKeys?: number): ScriptFn {
  const r = redis as Redis & Record<string, unknown>;
  if (!(name in r)) r.defineCommand(name, numberOfKeys === undefined ? { lua } : { numberOfKeys, lua });
  const fn = r[name] as ScriptFn | undefined;
  if (fn === undefined) throw new Error(`script ${name} not defined`);
  return fn.bind(r);
}
