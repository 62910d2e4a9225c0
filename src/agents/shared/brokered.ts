import {
  openAttemptEgress,
  type AttemptEgress,
  type ModelRoute,
  type ReachedEgress,
} from '../../process/egress/index.ts';
import type { FinalSpawn, SpawnSpec } from '../../process/index.ts';
import type { CliMessage } from '../../protocol/index.ts';
import type { AgentMapper } from './agent-mapper.ts';
import { startupFailure, type RunContext } from './run-attempt.ts';

/**
 * Credential brokering, the agents' half: each provider says where its model requests go and with
 * which key (a ModelRoute); the egress's sockets go to the spawn as bridges, and once their URLs
 * are known (SpawnSpec.finalize) the provider configures the agent with the model bridge's base URL
 * and a placeholder key. The real key stays in the worker.
 */

/** The attempt's egress when the runtime asked for one (null: the agent reaches the network directly). Throws when a listener cannot start. */
export async function openEgress(context: RunContext, route: ModelRoute | null): Promise<AttemptEgress | null> {
  if (context.egress === undefined) return null;
  return openAttemptEgress(context.egress, route);
}

/**
 * Runs `run` with the attempt's egress open (see openEgress) and closes it after, however the run
 * ends. An egress that cannot open is the attempt's startup failure, told by `mapper`.
 */
export async function* withEgress(
  context: RunContext,
  route: ModelRoute | null,
  mapper: AgentMapper,
  run: (egress: AttemptEgress | null) => AsyncGenerator<CliMessage, void, undefined>,
): AsyncGenerator<CliMessage, void, undefined> {
  let egress: AttemptEgress | null;
  try {
    egress = await openEgress(context, route);
  } catch (error) {
    yield* startupFailure(mapper, `cannot open the attempt's egress: ${(error as Error).message}`);
    return;
  }
  try {
    yield* run(egress);
  } finally {
    await egress?.close();
  }
}

/** The spawn fields that give the agent its egress: the bridges, and a finalize that configures the agent with their URLs. */
export function egressSpawn(
  egress: AttemptEgress | null,
  configure: (reached: ReachedEgress) => FinalSpawn | Promise<FinalSpawn>,
): Pick<SpawnSpec, 'bridges' | 'finalize'> {
  if (egress === null) return {};
  return { bridges: egress.bridges, finalize: (urls) => configure(egress.reached(urls)) };
}

/** A model route from a base URL (the agent's default when absent) and a key; null when there is no key or the URL is not http(s). */
export function modelRoute(
  baseUrl: string | undefined,
  defaultBaseUrl: string,
  key: string | undefined,
): ModelRoute | null {
  if (key === undefined || key === '') return null;
  try {
    const url = new URL(baseUrl !== undefined && baseUrl !== '' ? baseUrl : defaultBaseUrl);
    return url.protocol === 'https:' || url.protocol === 'http:' ? { baseUrl: url, key } : null;
  } catch {
    // Not a URL: no route, as documented above (the caller then brokers nothing).
    return null;
  }
}

/** The environment variables an agent takes its model host and key from (Claude Code, gemini). */
export interface EnvModelVars {
  /** The variable of the model's base URL. */
  baseUrl: string;
  /** Where the agent sends its model requests without it. */
  defaultBaseUrl: string;
  /** The variables of the key: the first one set holds it. */
  keys: readonly [string, string];
}

/** Where the agent's key is (`keyVar`) and its model route from `vars` (null: nothing to broker, see modelRoute). */
export function envModelRoute(
  env: Readonly<Record<string, string>>,
  vars: EnvModelVars,
): { keyVar: string; route: ModelRoute | null } {
  const [first, second] = vars.keys;
  const keyVar = env[first] !== undefined && env[first] !== '' ? first : second;
  return { keyVar, route: modelRoute(env[vars.baseUrl], vars.defaultBaseUrl, env[keyVar]) };
}

/**
 * The environment of an agent configured by `vars` under egress: brokered (its key variables
 * dropped, the base URL variable to the model bridge, `keyVar` holding the placeholder) when it has
 * a route and the bridge a URL, else only the proxy variables on top.
 */
export function envBrokeredEnv(
  env: Readonly<Record<string, string>>,
  reached: ReachedEgress,
  vars: EnvModelVars,
  model: { keyVar: string; route: ModelRoute | null },
  placeholder: string,
): Record<string, string> {
  if (model.route === null || reached.modelBaseUrl === null) return brokeredEnv(env, reached, null);
  const rest = Object.fromEntries(Object.entries(env).filter(([name]) => !vars.keys.includes(name)));
  return brokeredEnv(rest, reached, model.route.key, {
    [vars.baseUrl]: reached.modelBaseUrl,
    [model.keyVar]: placeholder,
  });
}

/** Keys shorter than this are not searched for in the environment (too likely to match an unrelated value). */
const MIN_KEY_LENGTH = 8;

/**
 * The agent's environment under egress: every variable holding the real key removed, `set` (the
 * placeholder key, the bridge's base URL) and then the proxy variables on top, so that no option
 * of the agent overrides them.
 */
export function brokeredEnv(
  env: Readonly<Record<string, string>>,
  reached: ReachedEgress,
  key: string | null,
  set: Readonly<Record<string, string>> = {},
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(env))
    if (key === null || key.length < MIN_KEY_LENGTH || !value.includes(key)) out[name] = value;
  return { ...out, ...set, ...reached.env };
}
