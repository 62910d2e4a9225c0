import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import {
  createWorkspaces,
  DEFAULT_WORKSPACE_EXCLUDE,
  type WorkspaceConfig,
  type Workspaces,
} from '../../src/workspace/index.ts';

/** A temporary directory for one test, removed by `cleanup`. */
export function tempDir(prefix = 'sessiond-ws-'): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A deployment's workspaces under `dir`: its root, git data and a local store; `.env*` excluded, no quota unless `extra` says. */
export function workspacesIn(dir: string, extra: Partial<WorkspaceConfig> = {}): WorkspaceConfig {
  return {
    root: join(dir, 'root'),
    gitDir: join(dir, 'git'),
    store: join(dir, 'store.git'),
    exclude: ['.env*'],
    maxBytes: 0,
    maxSnapshots: 0,
    ...extra,
  };
}

/** One "host": its own workspace root and git data, sharing `store` with the others. */
export function host(base: string, name: string, store: string, extra: Partial<WorkspaceConfig> = {}): Workspaces {
  return createWorkspaces({
    root: join(base, name, 'workspaces'),
    gitDir: join(base, name, 'git'),
    store,
    exclude: DEFAULT_WORKSPACE_EXCLUDE,
    maxBytes: 0,
    maxSnapshots: 0,
    ...extra,
  });
}

/** Plain git as the agent (or a test) runs it: no global or system config. */
export function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'user.name=agent', '-c', 'user.email=agent@example.com', ...args], {
    cwd,
    encoding: 'utf8',
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_CONFIG_GLOBAL: '/dev/null',
      HOME: cwd,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

export function write(root: string, files: Record<string, string>): void {
  for (const [name, content] of Object.entries(files)) {
    mkdirSync(dirname(join(root, name)), { recursive: true });
    writeFileSync(join(root, name), content);
  }
}

/** Every object's content in a bare repository, as one string (to look for a secret in it). */
export function allObjectText(repo: string): string {
  const ids = git(repo, 'cat-file', '--batch-all-objects', '--batch-check=%(objectname)')
    .split('\n')
    .filter((l) => l !== '');
  if (ids.length === 0) return '';
  return execFileSync('git', ['cat-file', '--batch'], { cwd: repo, input: `${ids.join('\n')}\n`, encoding: 'latin1' });
}

/** The refs of a bare repository. */
export function refs(repo: string): string[] {
  return git(repo, 'for-each-ref', '--format=%(refname)')
    .split('\n')
    .filter((l) => l !== '');
}
