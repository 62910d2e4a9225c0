import type { Queue } from 'bullmq';
import { hgetEach } from '../redis/batch.ts';
import type { ImportResult } from '../lifecycle/transfer.ts';
import { NotFoundError } from '../../errors.ts';
import { checkSessionId, type CallerParts } from './parts.ts';
import { listPage } from './session-view.ts';
import * as transfer from '../lifecycle/transfer.ts';

// Every session: export and import, states by id; and the deployment's queue (the listing and the workers: session-view.ts).

/** The newest `limit` sessions (default 1000), optionally only those in `state` (served by the state's index). */
export async function listSessions(
  parts: CallerParts,
  filter: { state?: string; limit?: number } = {},
): Promise<Array<{ sessionId: string; state: string }>> {
  return (await listPage(parts, { ...filter, limit: filter.limit ?? 1000 })).sessions;
}

/** The session as a versioned JSON-lines archive (see lifecycle/archive.ts). NotFoundError for an unknown id. */
export async function exportSession(parts: CallerParts, sessionId: string): Promise<string> {
  checkSessionId(sessionId);
  const archive = await transfer.exportSession(parts.redis, parts.keys, sessionId, parts.workspaces);
  if (archive === null) throw new NotFoundError(`unknown session "${sessionId}"`);
  return archive;
}

/** Restores an archive (as `as`, default its own id). ArchiveError (nothing written) or ConflictError (the id exists). */
export async function importSession(
  parts: CallerParts,
  text: string,
  options: { as?: string } = {},
): Promise<ImportResult> {
  // Checked as a caller's request: the imported retry policy against this deployment's bounds too.
  const limits = {
    maxArchiveBytes: parts.limits.maxArchiveBytes,
    maxArchiveLineBytes: parts.limits.maxArchiveLineBytes,
  };
  return transfer.importSession(parts.store, parts.queue, text, {
    ...(options.as === undefined ? {} : { as: options.as }),
    deployment: await parts.deploymentPolicy(),
    limits,
    workspaces: parts.workspaces,
  });
}

/** Each session's state as its own record says it (written in the same fenced script as its snapshot), in one pipeline; null for an unknown id. */
export async function sessionStates(
  parts: CallerParts,
  ids: readonly string[],
): Promise<Record<string, string | null>> {
  if (ids.length === 0) return {};
  const states = await hgetEach(
    parts.redis,
    ids.map((id) => parts.store.key(id, 'meta')),
    'state',
  );
  return Object.fromEntries(ids.map((id, i) => [id, states[i] ?? null]));
}

/** The activation queue's BullMQ queue (partition 0: with one partition, the whole queue), for an operator's view such as Bull Board. */
export function bullQueue(parts: CallerParts): Queue {
  return parts.queue.queue;
}
