import type { PersistedSession } from '../../../machines/restore.ts';
import { SESSION_ID_PATTERN } from '../keys.ts';
import { DEFAULT_AGENT } from '../../agents/default-agent.ts';
import { sessionUsage } from '../usage/usage.ts';
import type { RetryPolicy } from '../../retry/index.ts';
import { parseEntry, type StoredMessage } from '../store/session-store.ts';
import type { SessionRecord, WorkerHeartbeat } from './types.ts';
import { checkSessionId, safeJson, type ReaderParts } from './reader-parts.ts';
import { hasErrorCode, InputError } from '../../errors.ts';
import { lifecycleKeys } from '../lifecycle/keys.ts';
import { listPage as readListPage, type ListFilter, type ListPage } from '../lifecycle/listing.ts';

// Reading: one session's view (state, context, history, approvals, usage), its message log, live; the
// listing of every session. Over ReaderParts only (no queue, no BullMQ): what createReader serves.

export async function getSession(parts: ReaderParts, sessionId: string): Promise<SessionRecord | null> {
  if (!SESSION_ID_PATTERN.test(sessionId)) return null;
  const view = await parts.store.view(sessionId);
  if (view === null) return null;
  const { meta, snapshot: snapshotRaw, inbox, history, lastSeq, heldBy, cancel, steers } = view;
  const approvals = await parts.approvals.list(sessionId);
  const persisted = snapshotRaw === null ? null : (JSON.parse(snapshotRaw) as PersistedSession);
  return {
    sessionId,
    state: meta.state ?? 'queued',
    createdAt: Number(meta.createdAt),
    updatedAt: Number(meta.updatedAt ?? meta.createdAt),
    agent: meta.agent ?? DEFAULT_AGENT,
    options: safeJson(meta.options) as Record<string, unknown>,
    policyOverride: meta.policy ? (safeJson(meta.policy) as RetryPolicy) : null,
    context: persisted?.snapshot.context ?? null,
    queued: inbox.filter((p) => p.removed !== true).map((p) => ({ id: p.id, text: p.text, enqueuedAt: p.enqueuedAt })),
    steers: steers.map(({ prompt }) => ({ id: prompt.id, text: prompt.text, acceptedAt: prompt.enqueuedAt })),
    history: history as SessionRecord['history'],
    lastSeq,
    heldBy,
    cancelRequested: cancel !== null,
    approvals,
    usage: sessionUsage(meta),
    webhook: meta.webhook ?? null,
  };
}

/** The seq of the session's last stored message: 0 before its first (or for an unknown session). */
export async function lastSeq(parts: ReaderParts, sessionId: string): Promise<number> {
  checkSessionId(sessionId);
  return parts.store.lastSeq(sessionId);
}

export async function readMessages(
  parts: ReaderParts,
  sessionId: string,
  fromSeq = 1,
  count = 1000,
): Promise<StoredMessage[]> {
  checkSessionId(sessionId);
  return parts.store.readMessages(sessionId, fromSeq, count);
}

/**
 * Every message from `fromSeq` on, then new ones as they are written, until
 * the signal aborts. Uses its own blocking connection.
 */
export async function* followMessages(
  parts: ReaderParts,
  sessionId: string,
  fromSeq: number,
  signal: AbortSignal,
): AsyncGenerator<StoredMessage> {
  checkSessionId(sessionId);
  const reader = parts.connect('follow');
  const stop = (): void => reader.disconnect();
  signal.addEventListener('abort', stop, { once: true });
  let next = Math.max(1, fromSeq);
  try {
    while (!signal.aborted) {
      const batch = await reader
        .xread('COUNT', 500, 'BLOCK', 1000, 'STREAMS', parts.store.key(sessionId, 'log'), `${next - 1}-0`)
        .catch((error: Error) => {
          if (signal.aborted) return null;
          throw error;
        });
      if (batch === null) continue;
      for (const [, entries] of batch) {
        for (const [, fields] of entries) {
          const message = parseEntry(fields);
          next = message.seq + 1;
          yield message;
        }
      }
    }
  } finally {
    signal.removeEventListener('abort', stop);
    reader.disconnect();
  }
}

/** A page of sessions, newest first, from `cursor` (the `next` of the previous page); InputError for a bad cursor. */
export async function listPage(parts: ReaderParts, filter: ListFilter = {}): Promise<ListPage> {
  try {
    return await readListPage(parts.redis, parts.keys, filter, await parts.fleetShards());
  } catch (error) {
    if (hasErrorCode(error, 'invalid_cursor')) throw new InputError([{ field: 'cursor', message: error.message }]);
    throw error;
  }
}

/** A number that changes whenever anything shown in the listing changes (for ETags). */
export async function listingVersion(parts: ReaderParts): Promise<string> {
  // One counter per index shard, each only ever going up: their sum changes whenever one does.
  const shards = await parts.fleetShards();
  const versions = await Promise.all(
    Array.from({ length: shards }, (_, n) => parts.redis.get(lifecycleKeys(parts.keys, n).version)),
  );
  return String(versions.reduce((sum, v) => sum + Number(v ?? 0), 0));
}

/** The workers' latest heartbeats (a worker removes its own when it stops; a dead one's goes stale). */
export async function workers(parts: ReaderParts): Promise<WorkerHeartbeat[]> {
  const raw = await parts.redis.hgetall(parts.keys.workers);
  return Object.values(raw).map((v) => JSON.parse(v) as WorkerHeartbeat);
}
