/**
 * A session's workspace: its own files on the worker host, recorded as snapshots (git objects in a
 * store sessiond owns and the agent cannot write) at the boundaries that matter, restored on any
 * host from the latest snapshot the session's fenced writes name. docs/workspaces.md says what is
 * and is not captured.
 */

/** Where workspaces live and where their snapshots go. */
export interface WorkspaceConfig {
  /** The sessions' working copies on this host, one directory per session (SESSIOND_WORKSPACES). */
  readonly root: string;
  /**
   * sessiond's own git data on this host (per-session index and object cache). Never inside `root`
   * and never visible to an agent's sandbox.
   */
  readonly gitDir: string;
  /**
   * The snapshot store: a git remote URL (file://, git://, ssh, https) or a local bare repository's
   * path, created when it is a local path that does not exist yet (SESSIOND_WORKSPACE_STORE).
   */
  readonly store: string;
  /** Untracked files matching these patterns (gitignore syntax) are never snapshotted or shipped. */
  readonly exclude: readonly string[];
  /** Most bytes of a workspace's files a snapshot accepts (0: no limit). */
  readonly maxBytes: number;
  /** Most snapshots kept per session (0: no limit). */
  readonly maxSnapshots: number;
}

/** A repository a new workspace starts from (checked against the deployment policy before). */
export interface WorkspaceSource {
  readonly repo: string;
  /** A branch, tag or commit; default: the repository's HEAD. */
  readonly ref?: string;
}

/** One recorded state of a workspace: its files (tracked and untracked, not ignored) and the agent's own repository. */
export interface Snapshot {
  /** The snapshot's id (a commit id in the store). */
  readonly id: string;
  /** The snapshot this one was taken after, or null for a session's first. */
  readonly parent: string | null;
  /** What it marks, e.g. `turn 2 attempt 1 start`, `turn 2 tool call_1`. */
  readonly label: string;
  /** Epoch ms. */
  readonly at: number;
}

export interface SnapshotOptions {
  /** Nothing changes the copy after this snapshot until the next `prepare` (no agent process left in it). */
  readonly settled?: boolean;
}

/** A snapshot over the workspace's quota (`maxBytes` or `maxSnapshots`): nothing was recorded. */
export class WorkspaceQuotaError extends Error {
  override readonly name = 'WorkspaceQuotaError';
  constructor(
    readonly field: 'maxBytes' | 'maxSnapshots',
    readonly limit: number,
    readonly actual: number,
  ) {
    super(`workspace over its quota: ${field} is ${limit} (this snapshot: ${actual})`);
  }
}

/** A bad argument or input (a session id, a source repository, a ref, a bundle): `field` names it. */
export class WorkspaceInputError extends Error {
  override readonly name = 'WorkspaceInputError';
  constructor(
    readonly field: string,
    readonly problem: string,
  ) {
    super(`${field}: ${problem}`);
  }
}

/**
 * Contract: every method runs host-side git with nothing a workspace configures (no hooks,
 * fsmonitor, filters, external diff; no global or system config); files matching `exclude` never
 * enter a snapshot. Methods of one session are not called concurrently (the session's holder is
 * its only caller); different sessions' are independent.
 */
export interface Workspaces {
  /** The session's working copy on this host (the same path on every host). */
  path(sessionId: string): string;
  /**
   * Makes this host's copy hold exactly `snapshot` (restored from the store when the copy is
   * missing or not known to be at it; only new objects move), or, for null, creates the
   * workspace: empty, or a clone of `source`. The copy is then in use (an agent may change it):
   * it counts as being at a snapshot again only after `snapshot` or `restore`. Returns the path.
   */
  prepare(sessionId: string, snapshot: string | null, source?: WorkspaceSource): Promise<string>;
  /**
   * Records the copy as it is now and sends its new objects to the store; resolves once the store
   * lists it. `parent` must be one of the session's snapshots (or null). Throws WorkspaceQuotaError
   * over a quota (nothing recorded, the copy left as it is). The copy stays "in use" unless
   * `settled` says nothing changes it any more (the attempt's processes are gone): then the next
   * `prepare` of this snapshot on this host has nothing to do.
   */
  snapshot(sessionId: string, label: string, parent: string | null, options?: SnapshotOptions): Promise<Snapshot>;
  /**
   * Says that nothing changed the copy since it last held `snapshotId` exactly here (this instance's
   * last `snapshot` of the session, or the `prepare` of that snapshot), and nothing will any more
   * (the attempt's processes are gone): as `settled` would have, so the next `prepare` of it on this
   * host has nothing to do. Resolves false, doing nothing, when that is not `snapshotId` (or the copy
   * was restored or prepared anew since): the caller then takes a snapshot.
   */
  settle(sessionId: string, snapshotId: string): Promise<boolean>;
  /**
   * Makes this host's copy hold exactly `snapshotId` (files and the agent's repository); ignored
   * files and excluded ones are left as they are. Only while nothing runs in the copy: until the next
   * `prepare` the copy counts as being at `snapshotId`.
   */
  restore(sessionId: string, snapshotId: string): Promise<void>;
  /** The change from `from` (null: empty) to `to`: a unified diff, or `git diff --stat`'s summary. */
  diff(sessionId: string, from: string | null, to: string, options?: { stat?: boolean }): Promise<string>;
  /** Copies a snapshot of one session as the first of another (a fork); returns the new snapshot's id. */
  copy(fromSessionId: string, snapshotId: string, toSessionId: string): Promise<string>;
  /** Removes the session's copy on this host and every snapshot of it in the store. */
  remove(sessionId: string): Promise<void>;
  /** The snapshot and what it needs, as a git bundle (an archive's workspace). */
  bundle(sessionId: string, snapshotId: string): Promise<Buffer>;
  /** Stores a bundle's snapshot as the session's; returns its id. Refuses a bundle that is not one `bundle` made. */
  unbundle(sessionId: string, bundle: Buffer): Promise<string>;
  /**
   * Packs a local store and drops the objects no session's snapshots reach (removed sessions',
   * snapshots refused over a quota) once they are older than `graceMs`: a snapshot being written is
   * unreachable until its index moves, so the grace must exceed the longest snapshot. With `exists`,
   * the snapshot lists of sessions it says are gone and that did not change within `graceMs` are
   * deleted first (a removal that raced a snapshot of another host can leave one). Resolves false
   * for a URL store (its server's own maintenance does this). One run per store at a time (git's
   * own `gc.pid` lock); snapshots of other sessions may go on meanwhile.
   */
  compact(graceMs: number, exists?: (sessionIds: readonly string[]) => Promise<readonly boolean[]>): Promise<boolean>;
}
