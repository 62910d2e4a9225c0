import type { Queue } from 'bullmq';
import { hgetEach } from '../redis/batch.ts';
import type { ImportResult } from '../lifecycle/transfer.ts';
import { lifecycleKeys } from '../lifecycle/keys.ts';
import { listPage as readListPage, type ListFilter, type ListPage } from '../lifecycle/listing.ts';
import { hasErrorCode, InputError, NotFoundError } from '../../errors.ts';
import type { WorkerHeartbeat } from './types.ts';
import { checkSessionId, type CallerParts } from './parts.ts';
import * as transfer from '../lifecycle/transfer.ts';

// Every session: listing, export and import, the listing version; and the deployment's workers, Redis, queue.

/** The newest `limit` sessions (default 1000), optionally only those in `state` (served by the state's index). */
export async function listSessions(
  parts: CallerParts,
  filter: { state?: string; limit?: number } = {},
): Promise<Array<{ sessionId: string; state: string }>> {
  return (await listPage(parts, { ...filter, limit: filter.limit ?? 1000 })).sessions;
}

/** A page of sessions, newest first, from `cursor` (the `next` of the previous page); InputError for a bad cursor. */
export async function listPage(parts: CallerParts, filter: ListFilter = {}): Promise<ListPage> {
  try {
    return await readListPage(parts.redis, parts.keys, filter, await parts.queue.fleetShards());
  } catch (error) {
    if (hasErrorCode(error, 'invalid_cursor')) throw new InputError([{ field: 'cursor', message: error.message }]);
    throw error;
  }
}

/** The session as a versioned JSON-lines archive (see lifecycle/archive.ts). NotFoundError for an unknown id. */
export async function exportSession(parts: CallerParts, sessionId: string): Promise<string> {
  checkSessionId(sessionId);
  const archive = await transfer.exportSession(parts.redis, parts.keys, sessionId);
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
  });
}

/** A number that changes whenever anything shown in the listing changes (for ETags). */
export async function listingVersion(parts: CallerParts): Promise<string> {
  // One counter per index shard, each only ever going up: their sum changes whenever one does.
  const shards = await parts.queue.fleetShards();
  const versions = await Promise.all(
    Array.from({ length: shards }, (_, n) => parts.redis.get(lifecycleKeys(parts.keys, n).version)),
  );
  return String(versions.reduce((sum, v) => sum + Number(v ?? 0), 0));
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

export async function workers(parts: CallerParts): Promise<WorkerHeartbeat[]> {
  const raw = await parts.redis.hgetall(parts.keys.workers);
  return Object.values(raw).map((v) => JSON.parse(v) as WorkerHeartbeat);
}

/** Reaches Redis (a health check, or a client's first contact); rejects when it cannot. */
export async function ping(parts: CallerParts): Promise<void> {
  await parts.redis.ping();
}

/** The activation queue's BullMQ queue (partition 0: with one partition, the whole queue), for an operator's view such as Bull Board. */
export function bullQueue(parts: CallerParts): Queue {
  return parts.queue.queue;
}
