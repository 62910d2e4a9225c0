import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ModelRoute } from '../../process/egress/index.ts';

/**
 * Credential brokering for pi: pi reads its model's base URL and key from `models.json` in its
 * agent dir (`providers.<id>.baseUrl` / `apiKey`: the key itself or the name of an environment
 * variable holding it; `!command` keys are not brokered). Under egress each attempt gets an agent
 * dir of its own: links to the managed dir's entries, except `models.json` (every provider's key
 * replaced by the placeholder, the attempt's provider pointed at the model bridge) and, when the
 * key is brokered, `auth.json` (pi's stored logins: they hold keys). An attempt whose provider is
 * not brokered keeps auth.json (its login is how it authenticates).
 */

/** The route of `provider` in the user's models.json (null: not brokerable: no such provider, no baseUrl, a `!command` key, no key). Never throws. */
export async function piModelRoute(
  agentDir: string,
  provider: string | undefined,
  env: Readonly<Record<string, string>>,
): Promise<ModelRoute | null> {
  if (provider === undefined) return null;
  const models = await readModels(agentDir);
  const entry = models?.providers?.[provider];
  if (
    entry === undefined ||
    typeof entry.baseUrl !== 'string' ||
    typeof entry.apiKey !== 'string' ||
    entry.apiKey.startsWith('!')
  )
    return null;
  const key = env[entry.apiKey] !== undefined && env[entry.apiKey] !== '' ? env[entry.apiKey] : entry.apiKey;
  try {
    const url = new URL(entry.baseUrl);
    return key === undefined || key === '' || !/^https?:$/.test(url.protocol) ? null : { baseUrl: url, key };
  } catch {
    // A baseUrl that is no URL is one no bridge can stand in for: pi gets the entry as written.
    return null;
  }
}

interface ModelsFile {
  providers?: Record<string, { baseUrl?: unknown; apiKey?: unknown; [key: string]: unknown }>;
  [key: string]: unknown;
}

async function readModels(agentDir: string): Promise<ModelsFile | null> {
  // No models.json (ENOENT, the common case): pi uses its built-in providers, none to broker.
  const raw = await readFile(join(agentDir, 'models.json'), 'utf8').catch(() => null);
  if (raw === null) return null;
  try {
    const parsed: unknown = JSON.parse(raw);
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as ModelsFile) : null;
  } catch {
    // A models.json that is not JSON has no provider to broker: the attempt runs unbrokered, as without one.
    return null;
  }
}

/** Entries of the managed dir an attempt under egress does not get: models.json is its own; auth.json (pi's logins, keys) when its key is brokered. */
function withheld(brokered: boolean): Set<string> {
  return new Set(brokered ? ['models.json', 'auth.json'] : ['models.json']);
}

/**
 * Creates the attempt's agent dir under `parent` (removed by the returned cleanup): links to
 * `managedDir`'s entries but models.json (and auth.json when `brokered`); its models.json is written by `writeModels` once the model
 * bridge's URL is known. `sessions` is linked (created in the managed dir first) so that pi's
 * default session dir outlives the attempt.
 */
export async function brokeredAgentDir(
  managedDir: string,
  parent: string,
  brokered: boolean,
): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  await mkdir(parent, { recursive: true, mode: 0o700 });
  const dir = await mkdtemp(join(parent, 'attempt-'));
  // Best effort: a dir left behind holds links and a placeholder key only, and lies under the attempt's parent.
  const cleanup = (): Promise<void> => rm(dir, { recursive: true, force: true }).catch(() => undefined);
  try {
    await mkdir(join(managedDir, 'sessions'), { recursive: true, mode: 0o700 });
    const skip = withheld(brokered);
    for (const entry of await readdir(managedDir))
      if (!skip.has(entry)) await symlink(join(managedDir, entry), join(dir, entry));
    return { dir, cleanup };
  } catch (error) {
    await cleanup();
    throw error;
  }
}

/**
 * Writes the attempt's models.json: the managed dir's, with every provider's key replaced by the
 * placeholder and its `headers` left out (they may hold credentials), and `provider` pointed at
 * `baseUrl` (the model bridge; null: not brokered, that provider's entry left as it is).
 */
export async function writeModels(
  managedDir: string,
  dir: string,
  provider: string | undefined,
  baseUrl: string | null,
  placeholder: string,
): Promise<void> {
  const models = (await readModels(managedDir)) ?? {};
  const providers: NonNullable<ModelsFile['providers']> = {};
  for (const [id, entry] of Object.entries(models.providers ?? {})) {
    // Not brokered (no route for the attempt's provider): that provider keeps its own key and headers.
    if (id === provider && baseUrl === null) {
      providers[id] = entry;
      continue;
    }
    const { headers: _headers, ...rest } = entry;
    providers[id] = {
      ...rest,
      ...(entry.apiKey === undefined ? {} : { apiKey: placeholder }),
      ...(id === provider && baseUrl !== null ? { baseUrl } : {}),
    };
  }
  await writeFile(join(dir, 'models.json'), `${JSON.stringify({ ...models, providers }, null, 2)}\n`, { mode: 0o600 });
}
