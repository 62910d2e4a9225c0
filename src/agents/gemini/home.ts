import { lstat, mkdir, readFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { AGENT_MARKER_ENV } from '../../process/index.ts';
import {
  linkEntry,
  managedDirFor,
  sessiondStateDir,
  unlinkIfLink,
  writeFileIfChanged,
} from '../shared/managed-files.ts';

/**
 * gemini reads its settings, and keeps its chats, under `$GEMINI_CLI_HOME/.gemini` (default
 * `~/.gemini`). sessiond never edits the user's own dir: each user config dir gets a managed home
 * `<state dir>/gemini-home/<key>/` whose `.gemini/` holds
 * - settings.json: the user's settings with what one sessiond attempt needs forced on top;
 * - links to the user's read-mostly config (GEMINI.md, commands, skills, agents, policies,
 *   extensions, keybindings);
 * - gemini's own state for sessiond's runs (tmp/<project>/chats, history, projects.json), kept
 *   apart from the user's interactive chats.
 * HOME itself is left alone (`GEMINI_CLI_HOME` moves only gemini's dir), so the tools gemini runs
 * see the user's real home.
 */
export const LINKED_ENTRIES = [
  'GEMINI.md',
  'commands',
  'skills',
  'agents',
  'policies',
  'extensions',
  'keybindings.json',
] as const;

/** Forced on top of the user's settings.json. */
export const FORCED_SETTINGS = {
  // One attempt: the session machine is the only retry owner.
  // (0.61 names; it rewrites the older `disableAutoUpdate` / `disableUpdateNag` into these.)
  general: { maxAttempts: 1, enableAutoUpdate: false, enableAutoUpdateNotification: false },
  // Without it GOOGLE_GEMINI_BASE_URL switches auth to "gateway", which headless mode rejects (exit 41).
  security: { auth: { selectedType: 'gemini-api-key' } },
  telemetry: { enabled: false },
  privacy: { usageStatisticsEnabled: false },
} as const;

export function userGeminiDir(explicit: string | undefined, env: Record<string, string | undefined>): string {
  if (explicit !== undefined) return resolve(explicit);
  const cliHome = env.GEMINI_CLI_HOME;
  if (cliHome !== undefined && cliHome !== '') return join(resolve(cliHome), '.gemini');
  return join(env.HOME ?? homedir(), '.gemini');
}

/** The managed GEMINI_CLI_HOME for a user config dir (nothing is created). */
export function managedGeminiHome(userDir: string, stateDir: string): string {
  return managedDirFor(stateDir, 'gemini-home', userDir);
}

/** The managed home for raw (unvalidated) agent options, as the definition's export/import see them. */
export function managedHomeForOptions(
  options: Readonly<Record<string, unknown>>,
  env: Record<string, string | undefined>,
): string {
  const configDir = typeof options.configDir === 'string' ? options.configDir : undefined;
  return managedGeminiHome(userGeminiDir(configDir, env), sessiondStateDir(env));
}

/** Creates or refreshes the managed home for `userDir`; returns it. Throws with a clear message on I/O errors. */
export async function prepareManagedGeminiHome(userDir: string, stateDir: string): Promise<string> {
  const home = managedGeminiHome(userDir, stateDir);
  const dir = join(home, '.gemini');
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await mkdir(join(home, 'tmp'), { recursive: true, mode: 0o700 });
  for (const entry of LINKED_ENTRIES) {
    const target = join(userDir, entry);
    // Absent in the user's home: its link (if any) goes.
    if ((await lstat(target).catch(() => null)) === null) await unlinkIfLink(join(dir, entry));
    else await linkEntry(target, join(dir, entry));
  }
  await writeSettings(join(userDir, 'settings.json'), join(dir, 'settings.json'));
  return home;
}

/** The user's settings (comments allowed, as gemini allows them) with FORCED_SETTINGS on top. */
export function managedSettings(userSettings: Record<string, unknown>): Record<string, unknown> {
  const security = objectAt(userSettings, 'security');
  const redaction = objectAt(security, 'environmentVariableRedaction');
  const allowed = Array.isArray(redaction.allowed)
    ? redaction.allowed.filter((v): v is string => typeof v === 'string')
    : [];
  const { disableAutoUpdate: _old1, disableUpdateNag: _old2, ...general } = objectAt(userSettings, 'general');
  return {
    ...userSettings,
    general: { ...general, ...FORCED_SETTINGS.general },
    security: {
      ...security,
      auth: { ...objectAt(security, 'auth'), ...FORCED_SETTINGS.security.auth },
      // The tree marker must reach the tools gemini runs, even when it redacts their environment
      // (its strict mode under GitHub Actions keeps only a few variables): it is how sessiond
      // finds a tool process whose parent already exited.
      environmentVariableRedaction: {
        ...redaction,
        allowed: allowed.includes(AGENT_MARKER_ENV) ? allowed : [...allowed, AGENT_MARKER_ENV],
      },
    },
    telemetry: { ...objectAt(userSettings, 'telemetry'), ...FORCED_SETTINGS.telemetry },
    privacy: { ...objectAt(userSettings, 'privacy'), ...FORCED_SETTINGS.privacy },
  };
}

async function writeSettings(userSettingsPath: string, path: string): Promise<void> {
  let userSettings: Record<string, unknown> = {};
  // No user settings: the managed ones alone.
  const raw = await readFile(userSettingsPath, 'utf8').catch(() => null);
  if (raw !== null && raw.trim() !== '') {
    try {
      const parsed: unknown = JSON.parse(stripJsonComments(raw));
      if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed))
        userSettings = parsed as Record<string, unknown>;
    } catch {
      throw new Error(`${userSettingsPath}: not valid JSON; fix or remove it`);
    }
  }
  await writeFileIfChanged(path, `${JSON.stringify(managedSettings(userSettings), null, 2)}\n`);
}

function objectAt(source: Record<string, unknown>, key: string): Record<string, unknown> {
  const value = source[key];
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

/** Removes // and /* *\/ comments outside strings (gemini accepts them in settings.json). */
export function stripJsonComments(text: string): string {
  let out = '';
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      out += c;
      if (c === '\\') out += text[++i] ?? '';
      else if (c === '"') inString = false;
    } else if (c === '"') {
      inString = true;
      out += c;
    } else if (c === '/' && text[i + 1] === '/') {
      while (i < text.length && text[i] !== '\n') i++;
      out += '\n';
    } else if (c === '/' && text[i + 1] === '*') {
      i += 2;
      while (i < text.length && !(text[i] === '*' && text[i + 1] === '/')) i++;
      i++;
    } else {
      out += c;
    }
  }
  return out;
}
