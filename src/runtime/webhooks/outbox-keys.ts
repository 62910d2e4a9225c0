import { randomBytes } from 'node:crypto';
import type { Keys } from '../keys.ts';

/**
 * The outbox's keys. Per session (its hash tag, so WRITE records events with the transition):
 * `outbox` (hash event id → body), `due` (zset event id → when next due, ms), `state` (hash event id
 * → JSON of its attempts so far), `claim` (the deliverer's lease), `target` (the session's own webhook, set at enqueue:
 * hash `url`, `secret`; it outlives the session by TARGET_KEEP_MS so its `session.deleted` is still sent). They are not session parts
 * (lifecycle/keys.ts): a deleted session's events are still delivered; each key vanishes once empty.
 * Fleet-wide (`{<prefix>}`): `markers` (zset sessionId → when to look at its outbox; see outbox.ts),
 * `dead` (list of dead letters, newest first, capped), `deadSeq` (their numbering), `subscribed` (set of the
 * event types the deliverers' webhooks take, added by each at its start: a deletion, made by any caller, records
 * `session.deleted` only where one takes it).
 */
export type OutboxPart = 'outbox' | 'due' | 'state' | 'claim' | 'target';

/** How long a deleted session's webhook target is kept (the longest `webhookDelivery.maxAgeMs`). */
export const TARGET_KEEP_MS = 30 * 24 * 3600_000;

export function outboxKey(keys: Keys, sessionId: string, part: OutboxPart): string {
  return `${keys.prefix}:{s:${sessionId}}:wh-${part}`;
}

export function webhookFleetKeys(keys: Keys): { markers: string; dead: string; deadSeq: string; subscribed: string } {
  return {
    markers: `{${keys.prefix}}:wh-markers`,
    dead: `{${keys.prefix}}:wh-dead`,
    deadSeq: `{${keys.prefix}}:wh-dead-seq`,
    subscribed: `{${keys.prefix}}:wh-subscribed`,
  };
}

/** A new event's id: its `webhook-id`, the same on every retry and replay. */
export function eventId(): string {
  return `msg_${randomBytes(12).toString('hex')}`;
}

/** What the session store calls around a write that records events (see SessionStore.webhooks). */
export interface OutboxHooks {
  readonly maxPerSession: number;
  /** The operator's webhooks are configured: every session's events are recorded (else only those of a session with its own). */
  readonly operator: boolean;
  /** Before the write: the session is where deliverers look (a crash after the write leaves it there). */
  mark(sessionId: string): Promise<void>;
  /** After it: look at it now. */
  wrote(sessionId: string): void;
}
