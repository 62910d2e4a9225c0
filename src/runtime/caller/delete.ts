import { removeSession } from '../lifecycle/remove.ts';
import { AUDIT_MAX, lifecycleKeys } from '../lifecycle/keys.ts';
import { ConflictError, NotFoundError } from '../../errors.ts';
import { checkSessionId, type CallerParts } from './parts.ts';

/** One entry of the deletion audit: a delete that reached the session (deleted, already deleted, refused as active). */
export interface DeletionRecord {
  at: number;
  sessionId: string;
  actor: string;
  force: boolean;
  outcome: string;
  cancelled: boolean;
}

// Deleting a session fleet-wide, and the deletion audit.

/**
 * Deletes a session fleet-wide: without `force` only a finished one (else ConflictError); with
 * `force` a running turn is cancelled first (its process tree gone). Deleting again within the
 * hour is not an error (`deleted: false`); an id never seen is a NotFoundError. Every call that gets
 * as far as the session (deleted, already deleted, refused as active) is recorded in the deletion
 * audit stream with `actor` (who asked: a token's name, `cli:user@host`…); an unknown id is not.
 */
export async function deleteSession(
  parts: CallerParts,
  sessionId: string,
  options: { force?: boolean; waitMs?: number; actor?: string } = {},
): Promise<{ sessionId: string; deleted: boolean; cancelled: boolean }> {
  checkSessionId(sessionId);
  const result = await removeSession(
    { redis: parts.redis, keys: parts.keys, queue: parts.queue, publish: (event) => parts.bus.publish(event) },
    sessionId,
    {
      mode: options.force === true ? 'force' : 'finished',
      tombstoneMs: 3_600_000,
      ...(options.actor === undefined ? {} : { actor: options.actor }),
      ...(options.waitMs === undefined ? {} : { waitMs: options.waitMs }),
    },
  );
  if (result.outcome === 'unknown') throw new NotFoundError(`unknown session "${sessionId}"`);
  const outcome =
    result.outcome === 'active' ? 'refused' : result.outcome === 'removed' ? 'deleted' : 'already-deleted';
  await parts.redis.xadd(
    lifecycleKeys(parts.keys).deletions,
    'MAXLEN',
    '~',
    AUDIT_MAX,
    '*',
    ...[
      'sessionId',
      sessionId,
      'actor',
      options.actor ?? 'unknown',
      'force',
      String(options.force === true),
      'outcome',
      outcome,
      'cancelled',
      String(result.outcome === 'removed' && result.cancelled),
    ],
  );
  if (result.outcome === 'active')
    throw new ConflictError(
      `session "${sessionId}" is active (state ${result.state}, or prompts waiting): cancel its turn first, or delete with force`,
    );
  if (result.outcome === 'removed') return { sessionId, deleted: true, cancelled: result.cancelled };
  return { sessionId, deleted: false, cancelled: false };
}

/** The deletion audit stream, newest first (at most `limit` entries; about AUDIT_MAX are kept). */
export async function deletions(parts: CallerParts, limit = 100): Promise<DeletionRecord[]> {
  const entries = (await parts.redis.xrevrange(
    lifecycleKeys(parts.keys).deletions,
    '+',
    '-',
    'COUNT',
    Math.max(1, limit),
  )) as Array<[string, string[]]>;
  return entries.map(([id, flat]) => {
    const f: Record<string, string> = {};
    for (let i = 0; i + 1 < flat.length; i += 2) f[flat[i] as string] = flat[i + 1] as string;
    return {
      at: Number(id.split('-')[0]),
      sessionId: f['sessionId'] ?? '',
      actor: f['actor'] ?? 'unknown',
      force: f['force'] === 'true',
      outcome: f['outcome'] ?? '',
      cancelled: f['cancelled'] === 'true',
    };
  });
}
