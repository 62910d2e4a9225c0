import type { Redis } from 'ioredis';
import type { Keys } from '../keys.ts';
import type { RemoveMode } from '../lifecycle/remove.ts';
import { eventId, outboxKey, TARGET_KEEP_MS, webhookFleetKeys } from './outbox-keys.ts';

/** What PURGE (lifecycle/scripts.ts) needs to record a `session.deleted` event with the removal. */
export interface DeletedEvent {
  /** The session's outbox, due set and webhook target: PURGE's last three keys. */
  keys: [string, string, string];
  /** How long PURGE keeps the session's own webhook target (for this event). */
  keepTargetMs: number;
  id: string;
  /** Starts `{"turn":-1,`: PURGE puts the session's last turn there. */
  body: string;
  /** After the PURGE: deliverers look at the session now rather than at their next look at the markers. */
  wrote(): void;
}

/**
 * The `session.deleted` event of a removal, or null when no deliverer's webhooks take it (the fleet's
 * `subscriptions`, renewed by running deliverers: a deletion is made by any caller, which does not read the webhooks' configuration) and the
 * session has no webhook of its own (its target, kept by PURGE for this event: TARGET_KEEP_MS).
 * `reason`: `deleted` (a caller asked; `force` when a running turn was cancelled for it) or `expired`
 * (retention). The session is marked for the deliverers before the PURGE, as a fenced write is: a
 * process that dies right after the removal still leaves its event where they look.
 */
export async function deletedEvent(
  redis: Redis,
  keys: Keys,
  sessionId: string,
  about: { mode: RemoveMode; actor?: string },
): Promise<DeletedEvent | null> {
  const fleet = webhookFleetKeys(keys);
  const target = outboxKey(keys, sessionId, 'target');
  const [until, own] = await Promise.all([redis.zscore(fleet.subscriptions, 'session.deleted'), redis.exists(target)]);
  if ((until === null || Number(until) <= Date.now()) && own !== 1) return null;
  await redis.zadd(fleet.markers, Date.now(), sessionId);
  const id = eventId();
  const body = JSON.stringify({
    turn: -1,
    type: 'session.deleted',
    id,
    sessionId,
    at: new Date().toISOString(),
    reason: about.mode === 'expire' ? 'expired' : 'deleted',
    force: about.mode === 'force',
    ...(about.actor === undefined ? {} : { actor: about.actor }),
  });
  return {
    keys: [outboxKey(keys, sessionId, 'outbox'), outboxKey(keys, sessionId, 'due'), target],
    keepTargetMs: TARGET_KEEP_MS,
    id,
    body,
    wrote: () => {
      redis.zadd(fleet.markers, Date.now(), sessionId).catch(
        // The marker set before the PURGE already has it looked at; this one only makes it sooner.
        () => undefined,
      );
    },
  };
}
