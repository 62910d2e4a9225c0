import { isAbsolute, join, relative, resolve } from 'node:path';
import { WORKSPACE_DEFAULTS } from '../config/defaults.ts';
import { WorkspaceInputError, type WorkspaceConfig } from './types.ts';

/** Untracked files never snapshotted or shipped unless the deployment says otherwise. */
export const DEFAULT_WORKSPACE_EXCLUDE: readonly string[] = WORKSPACE_DEFAULTS.exclude;

const SESSION_ID = /^(?!\.{1,2}$)[A-Za-z0-9_.-]{1,100}$/;
const OBJECT_ID = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;

export function checkSessionId(value: unknown, field = 'sessionId'): string {
  if (typeof value !== 'string' || !SESSION_ID.test(value)) {
    throw new WorkspaceInputError(field, `must match ${String(SESSION_ID)} (got ${JSON.stringify(value)})`);
  }
  return value;
}

export function checkSnapshotId(value: unknown, field: string): string {
  if (typeof value !== 'string' || !OBJECT_ID.test(value)) {
    throw new WorkspaceInputError(field, `must be a snapshot id (40 or 64 hex digits), got ${JSON.stringify(value)}`);
  }
  return value;
}

/** The ref of a session's snapshot list in the store: hex, because session ids may hold `..` or end in `.lock`. */
export function storeRef(sessionId: string): string {
  return `refs/sessiond/${Buffer.from(sessionId, 'utf8').toString('hex')}`;
}

function inside(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

/** Is the store a local path (created when missing) rather than a URL? */
export function isLocalStore(store: string): boolean {
  return isAbsolute(store);
}

export function checkConfig(config: WorkspaceConfig): WorkspaceConfig {
  for (const field of ['root', 'gitDir'] as const) {
    const value: unknown = config[field];
    if (typeof value !== 'string' || !isAbsolute(value)) {
      throw new WorkspaceInputError(field, `must be an absolute path (got ${JSON.stringify(value)})`);
    }
  }
  const root = resolve(config.root);
  const gitDir = resolve(config.gitDir);
  if (inside(root, gitDir) || inside(gitDir, root)) {
    throw new WorkspaceInputError('gitDir', `must be outside root (${root}) and not contain it`);
  }
  const store: unknown = config.store;
  if (
    typeof store !== 'string' ||
    store.startsWith('-') ||
    !(isAbsolute(store) || /^(?:file|git|ssh|https):\/\/./.test(store) || /^[\w.-]+@[\w.-]+:/.test(store))
  ) {
    throw new WorkspaceInputError(
      'store',
      `must be an absolute path or a file://, git://, ssh:// or https:// URL (got ${JSON.stringify(store)})`,
    );
  }
  if (isAbsolute(store) && (inside(root, resolve(store)) || inside(resolve(store), root))) {
    throw new WorkspaceInputError('store', `must be outside root (${root})`);
  }
  if (!Array.isArray(config.exclude) || !config.exclude.every((p) => typeof p === 'string' && !/[\n\r\0]/.test(p))) {
    throw new WorkspaceInputError('exclude', 'must be a list of gitignore patterns, one line each');
  }
  for (const field of ['maxBytes', 'maxSnapshots'] as const) {
    const value: unknown = config[field];
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
      throw new WorkspaceInputError(field, `must be a whole number ≥ 0, 0 for no limit (got ${String(value)})`);
    }
  }
  return { ...config, root, gitDir, store: isAbsolute(store) ? resolve(store) : store };
}

/** Where sessiond keeps one session's git data on this host. */
export interface SessionPaths {
  readonly workspace: string;
  readonly dir: string;
  /** The private bare repository (GIT_DIR of every call). */
  readonly repo: string;
  /** The index of the working files. */
  readonly filesIndex: string;
  /** The index of the agent's own repository (the workspace's `.git`) recorded as data. */
  readonly gitIndex: string;
  /** Holds the snapshot id the copy is known to be at, when it is not in use. */
  readonly marker: string;
}

export function sessionPaths(config: WorkspaceConfig, sessionId: string): SessionPaths {
  const dir = join(config.gitDir, 'sessions', sessionId);
  return {
    workspace: join(config.root, sessionId),
    dir,
    repo: join(dir, 'repo.git'),
    filesIndex: join(dir, 'index-files'),
    gitIndex: join(dir, 'index-git'),
    marker: join(dir, 'at'),
  };
}
