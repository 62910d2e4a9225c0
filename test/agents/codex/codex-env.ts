/**
 * An isolated environment for running the real `codex` CLI against the fake Responses server: a
 * temp HOME, the "user's" CODEX_HOME (config.toml), sessiond's state dir and a cwd.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { envRoot } from '../../support/pi-env.ts';
import type { CodexOptionsInput } from '../../../src/agents/codex/options.ts';

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
/** The pinned Codex CLI (0.171.0), installed outside the main npm ci (see agent-clis/package.json). */
export const codexBin = join(REPO_ROOT, 'agent-clis', 'node_modules', '.bin', 'codex');
/** A model slug Codex 0.171 knows (an unknown one adds an `error` item "Model metadata … not found"). */
export const FAKE_MODEL = 'gpt-5.5';
export const FAKE_KEY_ENV = 'FAKE_OPENAI_KEY';
export const FAKE_KEY = 'fake-key-not-secret';

export interface CodexEnv {
  root: string;
  home: string;
  /** The user's CODEX_HOME (sessiond must never write here). */
  userCodexHome: string;
  stateDir: string;
  cwd: string;
  /** The environment for sessiond's runs (a minimal one: nothing of the parent but PATH and locale). */
  env: Record<string, string>;
  cleanup(): void;
}

export interface CodexEnvOptions {
  /** The user's config.toml (default: only `model`). */
  config?: string;
  /** Use this directory as the root (deleted and recreated) instead of a fresh mkdtemp dir. */
  root?: string;
}

export function createCodexEnv(options: CodexEnvOptions = {}): CodexEnv {
  const root = envRoot(options.root, 'codex-env-');
  const home = join(root, 'home');
  const userCodexHome = join(home, '.codex');
  const stateDir = join(root, 'state');
  const cwd = join(root, 'work');
  for (const dir of [home, userCodexHome, stateDir, cwd]) mkdirSync(dir, { recursive: true });
  writeFileSync(join(userCodexHome, 'config.toml'), options.config ?? `model = "${FAKE_MODEL}"\n`);
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    HOME: home,
    LANG: process.env.LANG ?? 'C.UTF-8',
    TMPDIR: tmpdir(),
    SESSIOND_STATE_DIR: stateDir,
    [FAKE_KEY_ENV]: FAKE_KEY,
  };
  return {
    root,
    home,
    userCodexHome,
    stateDir,
    cwd,
    env,
    cleanup: () => rmSync(root, { recursive: true, force: true }),
  };
}

/** A user config.toml that selects its own provider `fake` at `baseUrl`, with Codex's retries ON. */
export function userProviderConfig(baseUrl: string, retries: number): string {
  return [
    `model = "${FAKE_MODEL}"`,
    'model_provider = "fake"',
    '',
    '[model_providers.fake]',
    'name = "Fake local"',
    `base_url = "${baseUrl}"`,
    'wire_api = "responses"',
    `env_key = "${FAKE_KEY_ENV}"`,
    `request_max_retries = ${retries}`,
    `stream_max_retries = ${retries}`,
    '',
  ].join('\n');
}

/** runCodex options for `env`, talking to `baseUrl` (a `server.urlFor(script)`). */
export function codexOptions(
  env: CodexEnv,
  baseUrl: string,
  extra: Partial<CodexOptionsInput> = {},
): CodexOptionsInput {
  return {
    prompt: 'Say hello. If asked, run echo hi.',
    cwd: env.cwd,
    model: FAKE_MODEL,
    baseUrl,
    envKey: FAKE_KEY_ENV,
    command: codexBin,
    codexHome: env.userCodexHome,
    env: env.env,
    ...extra,
  };
}
