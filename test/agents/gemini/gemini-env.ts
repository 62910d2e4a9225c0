/**
 * An isolated environment for running the real `gemini` CLI (0.61.0, pinned in agent-clis/)
 * against the fake Gemini API: a temp root with the user's gemini config dir, a cwd, a TMPDIR
 * and a sessiond state dir.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { envRoot } from '../../support/pi-env.ts';

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
/** The pinned CLI, installed by scripts/install-agent-clis.sh. */
export const geminiBin = join(REPO_ROOT, 'agent-clis', 'node_modules', '.bin', 'gemini');

export const FAKE_API_KEY = 'fake-gemini-key-not-secret';

/** The settings that make one headless attempt against a local fake API (see the fixtures README). */
export const RECORDING_SETTINGS = {
  security: { auth: { selectedType: 'gemini-api-key' } },
  privacy: { usageStatisticsEnabled: false },
  telemetry: { enabled: false },
  general: { maxAttempts: 1, enableAutoUpdate: false, enableAutoUpdateNotification: false },
} as const;

export interface GeminiEnv {
  root: string;
  /** The user's HOME (not touched by sessiond). */
  home: string;
  /** The user's gemini config dir (`<home>/.gemini`). */
  configDir: string;
  cwd: string;
  tmp: string;
  /** SESSIOND_STATE_DIR: where sessiond keeps the managed gemini home. */
  stateDir: string;
  /** What a caller passes as `options.env`. */
  env: Record<string, string>;
  cleanup(): void;
}

export interface GeminiEnvOptions {
  /** Origin of the fake API, e.g. `http://127.0.0.1:1234`. */
  serverUrl: string;
  /** The user's own settings.json (default: none). */
  userSettings?: Record<string, unknown>;
  /** Use this directory as the root (deleted and recreated) instead of a fresh temp dir. */
  root?: string;
}

export function createGeminiEnv(options: GeminiEnvOptions): GeminiEnv {
  const root = envRoot(options.root, 'gemini-env-');
  const home = join(root, 'home');
  const configDir = join(home, '.gemini');
  const cwd = join(root, 'work');
  const tmp = join(root, 'tmp');
  const stateDir = join(root, 'state');
  for (const dir of [home, configDir, cwd, tmp, stateDir]) mkdirSync(dir, { recursive: true });
  if (options.userSettings !== undefined)
    writeFileSync(join(configDir, 'settings.json'), `${JSON.stringify(options.userSettings, null, 2)}\n`);
  return {
    root,
    home,
    configDir,
    cwd,
    tmp,
    stateDir,
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: home,
      LANG: 'C.UTF-8',
      TMPDIR: tmp,
      GEMINI_API_KEY: FAKE_API_KEY,
      GOOGLE_GEMINI_BASE_URL: options.serverUrl,
      SESSIOND_STATE_DIR: stateDir,
    },
    cleanup: () => rmSync(root, { recursive: true, force: true }),
  };
}
