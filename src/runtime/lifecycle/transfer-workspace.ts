import type { SessionStore } from '../store/session-store.ts';
import { WorkspaceInputError, WorkspaceQuotaError, type Workspaces } from '../../workspace/types.ts';
import type { POINTER_FIELD as PointerField, WorkspacePointer } from '../session-loop/workspace-attempt.ts';
import { ArchiveError, type Archive } from './archive.ts';
import { ConflictError } from './errors.ts';
import { lifecycleKeys } from './keys.ts';

// A session's workspace in export and import (transfer.ts): the pointer's snapshot bundled on the way
// out, stored in this deployment's store on the way in, removed again when the session is not written.

/** The agent-state field of the workspace pointer (workspace-attempt.ts's, not loaded here: the client needs none of the attempt's code). */
export const POINTER_FIELD: typeof PointerField = 'workspace';

/**
 * The archive's workspace of a session whose stored pointer is `raw`: the pointer and the bundle of its
 * snapshot (snapshots do not change once made). ConflictError when this client has no workspaces, the
 * pointer does not parse, or the store it reaches lacks the snapshot: an archive without the files is
 * never written.
 */
export async function exportedWorkspace(
  raw: string,
  sessionId: string,
  workspaces: Workspaces | null,
): Promise<NonNullable<Archive['workspace']>> {
  const pointer = parseStoredPointer(raw, sessionId);
  if (workspaces === null)
    throw new ConflictError(
      `session "${sessionId}" has a workspace, and this client has none configured (workspaces.enabled, SESSIOND_WORKSPACES_ENABLED, with the workers' store): its archive would lose its files`,
    );
  const bundle = await workspaces.bundle(sessionId, pointer.snapshot).catch((error: unknown) => {
    // Its store not the workers' (another SESSIOND_WORKSPACE_STORE), or the session removed since.
    if (!(error instanceof WorkspaceInputError)) throw error;
    throw new ConflictError(
      `session "${sessionId}": its workspace's snapshot ${pointer.snapshot} is not in the store this client reaches (${error.message}): not exported`,
    );
  });
  return { pointer, bundle };
}

/** The session's stored pointer; one that does not parse is refused (what the archive would carry is unknown). */
function parseStoredPointer(raw: string, sessionId: string): WorkspacePointer {
  let value: Partial<WorkspacePointer> | null = null;
  try {
    value = JSON.parse(raw) as Partial<WorkspacePointer>;
  } catch {
    // Said just below.
  }
  if (value === null || value.version !== 1 || typeof value.snapshot !== 'string')
    throw new ConflictError(`session "${sessionId}": its workspace pointer does not parse: not exported`);
  return value as WorkspacePointer;
}

/**
 * Stores an archive's workspace bundle as session `sessionId`'s; returns the snapshot's id. A removal
 * of an earlier session of that id still pending (workspace-sweep.ts) is done first, or the sweep
 * would take the imported snapshots; a bundle refused, or anything failing, leaves nothing stored.
 */
export async function storeWorkspace(
  workspaces: Workspaces,
  store: SessionStore,
  sessionId: string,
  bundle: Buffer,
  line: number | undefined,
): Promise<string> {
  const gone = lifecycleKeys(store.keys).workspacesGone;
  if ((await store.redis.zrem(gone, sessionId)) === 1) {
    try {
      await workspaces.remove(sessionId);
    } catch (error) {
      await store.redis.zadd(gone, Date.now(), sessionId);
      throw error;
    }
  }
  try {
    return await workspaces.unbundle(sessionId, bundle);
  } catch (error) {
    const refused =
      error instanceof WorkspaceInputError || error instanceof WorkspaceQuotaError
        ? new ArchiveError(`workspace: ${error.message}`, line)
        : error;
    return removeStored(workspaces, sessionId, refused);
  }
}

/** Removes what an import stored of session `sessionId`'s workspace, then throws `cause` (or, when that fails too, both). */
export async function removeStored(workspaces: Workspaces, sessionId: string, cause: unknown): Promise<never> {
  try {
    await workspaces.remove(sessionId);
  } catch (failure) {
    throw new Error(
      `${(cause as Error).message}; and the workspace stored for "${sessionId}" could not be removed: ${(failure as Error).message}`,
      { cause },
    );
  }
  throw cause;
}
