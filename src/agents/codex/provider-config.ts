import { tomlString, type CodexOptions } from './options.ts';

/**
 * Codex's providers that nobody can reconfigure: Codex 0.171 refuses to load a config that has
 * `model_providers.openai` (or `ollama`, `lmstudio`) — "Built-in providers cannot be overridden" —
 * so their `request_max_retries` / `stream_max_retries` cannot be set to 0 (measured).
 */
export const BUILTIN_PROVIDERS = new Set(['openai', 'ollama', 'lmstudio']);

/** The provider sessiond defines for `baseUrl`. */
export const SESSIOND_PROVIDER_ID = 'sessiond';

export type ProviderArgs = { ok: true; providerId: string; args: string[] } | { ok: false; error: string };

const NO_RETRIES = ['request_max_retries', 'stream_max_retries'] as const;

/**
 * The `-c` overrides that select the model provider of this attempt and force its retries to 0,
 * without touching the user's config.toml (`-c` wins over it). `userConfig` is the text of the
 * user's config.toml (or null), read only for `model_provider` and `profile`.
 * Contract: pure, never throws.
 */
export function providerArgs(
  options: Pick<CodexOptions, 'provider' | 'baseUrl' | 'envKey'>,
  userConfig: string | null,
): ProviderArgs {
  if (options.baseUrl !== undefined) {
    const fields = [
      `name = ${tomlString('sessiond')}`,
      `base_url = ${tomlString(options.baseUrl)}`,
      `wire_api = ${tomlString('responses')}`,
      ...(options.envKey === undefined ? [] : [`env_key = ${tomlString(options.envKey)}`]),
      ...NO_RETRIES.map((key) => `${key} = 0`),
    ];
    return {
      ok: true,
      providerId: SESSIOND_PROVIDER_ID,
      args: [
        '-c',
        `model_provider=${tomlString(SESSIOND_PROVIDER_ID)}`,
        '-c',
        `model_providers.${SESSIOND_PROVIDER_ID}={ ${fields.join(', ')} }`,
      ],
    };
  }
  const explicit = options.provider;
  const id = explicit ?? selectedProvider(userConfig ?? '') ?? 'openai';
  if (BUILTIN_PROVIDERS.has(id)) {
    return {
      ok: false,
      error:
        `Codex's built-in model provider "${id}" keeps its own retries (Codex refuses to change them), and sessiond runs every attempt once. ` +
        `Give the agent option baseUrl (and envKey), e.g. baseUrl "https://api.openai.com/v1" with envKey "OPENAI_API_KEY", ` +
        'or provider: the id of a [model_providers.<id>] table in config.toml.',
    };
  }
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(id))
    return { ok: false, error: `config.toml selects model_provider "${id}", which is not a plain provider id` };
  return {
    ok: true,
    providerId: id,
    args: [
      ...(explicit === undefined ? [] : ['-c', `model_provider=${tomlString(id)}`]),
      ...NO_RETRIES.flatMap((key) => ['-c', `model_providers.${id}.${key}=0`]),
    ],
  };
}

/**
 * The `model_provider` a config.toml selects: the active profile's (`profile = "p"` → `[profiles.p]`),
 * else the top-level one; undefined when none is set. Reads only single-line `key = "string"` entries.
 */
export function selectedProvider(configText: string): string | undefined {
  const tables = tomlStringKeys(configText);
  const top = tables.get('');
  const profile = top?.get('profile');
  const fromProfile =
    profile === undefined
      ? undefined
      : (tables.get(`profiles.${profile}`)?.get('model_provider') ??
        tables.get(`profiles."${profile}"`)?.get('model_provider'));
  return fromProfile ?? top?.get('model_provider');
}

const TABLE_HEADER = /^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$/;
const STRING_ENTRY = /^\s*([A-Za-z0-9_-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|'([^']*)')\s*(?:#.*)?$/;

/** Single-line string entries per table (`''` = top level). Multi-line strings and arrays are skipped. */
function tomlStringKeys(text: string): Map<string, Map<string, string>> {
  const tables = new Map<string, Map<string, string>>();
  let current = '';
  let inMultiline: string | null = null;
  for (const line of text.split('\n')) {
    if (inMultiline !== null) {
      if (line.includes(inMultiline)) inMultiline = null;
      continue;
    }
    const opener = /=\s*("""|''')/.exec(line);
    if (opener?.[1] !== undefined && line.indexOf(opener[1]) === line.lastIndexOf(opener[1])) {
      inMultiline = opener[1];
      continue;
    }
    const header = TABLE_HEADER.exec(line);
    if (header?.[1] !== undefined) {
      current = header[1].replace(/\s*\.\s*/g, '.');
      continue;
    }
    const entry = STRING_ENTRY.exec(line);
    if (entry?.[1] === undefined) continue;
    const value = entry[2] !== undefined ? unescapeBasic(entry[2]) : (entry[3] ?? '');
    let table = tables.get(current);
    if (table === undefined) tables.set(current, (table = new Map()));
    table.set(entry[1], value);
  }
  return tables;
}

function unescapeBasic(raw: string): string {
  try {
    return JSON.parse(`"${raw}"`) as string;
  } catch {
    // Not a valid escaped string: used as written.
    return raw;
  }
}
