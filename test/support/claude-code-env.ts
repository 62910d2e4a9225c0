/**
 * An isolated environment for running the real Claude Code CLI (agent-clis/, pinned 2.1.332)
 * against the fake Anthropic server: a temp root with `home/` (HOME), `config/`
 * (CLAUDE_CONFIG_DIR: settings and session files), `tmp/` (TMPDIR) and `work/` (the cwd).
 */
import { mkdirSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ClaudeCodeOptionsInput } from '../../src/agents/claude-code/options.ts';
import { envRoot } from './pi-env.ts';

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** Installed by scripts/install-agent-clis.sh. */
export const claudeBin = join(REPO_ROOT, 'agent-clis', 'node_modules', '.bin', 'claude');
export const FAKE_ANTHROPIC_KEY = 'sk-ant-fake-not-secret';

export interface ClaudeEnv {
  root: string;
  home: string;
  configDir: string;
  tmpDir: string;
  cwd: string;
  /** Options every run in this environment shares (without prompt and model). */
  options: Pick<ClaudeCodeOptionsInput, 'cwd' | 'configDir' | 'tmpDir' | 'command' | 'env'>;
  cleanup(): void;
}

export function createClaudeEnv(serverUrl: string, root?: string): ClaudeEnv {
  const dir = envRoot(root, 'claude-env-');
  const home = join(dir, 'home');
  const configDir = join(dir, 'config');
  const tmpDir = join(dir, 'tmp');
  const cwd = join(dir, 'work');
  for (const d of [home, configDir, tmpDir, cwd]) mkdirSync(d, { recursive: true });
  return {
    root: dir,
    home,
    configDir,
    tmpDir,
    cwd,
    options: {
      cwd,
      configDir,
      tmpDir,
      command: claudeBin,
      env: { HOME: home, ANTHROPIC_BASE_URL: serverUrl, ANTHROPIC_API_KEY: FAKE_ANTHROPIC_KEY },
    },
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}
