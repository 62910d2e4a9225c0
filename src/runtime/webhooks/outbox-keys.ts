import { randomBytes } from 'node:crypto';
import type { Keys } from '../keys.ts';

/**
 * The outbox's keys. Per session (its hash tag, so WRITE records events with the transition):
 * `outbox` (hash event id → body), `due` (zset event id → when next due, ms), `state` (hash event id
 * → JSON of its attempts so far), `claim` (the deliverer's lease), `target` (the session's own webhook, set at enqueue:
 * hash `url`, `secret`; it outlives the session by TARGET_KEEP_MS so its `session.deleted` is still sent), `owed` (hash event id → the
session webhook an event waiting when the target was replaced or dropped is owed: JSON `{url, secret}` of the one it was recorded
for, or `none`; set by ENQUEUE, store/scripts.ts, removed with the event). They are not session parts
 * (lifecycle/keys.ts): a deleted session's events are still delivered; each key vanishes once empty.
 * Fleet-wide (`{<prefix>}`): `markers` (zset sessionId → when to look at its outbox; see outbox.ts),
 * `dead` (list of dead letters, newest first, capped), `deadSeq` (their numbering), `subscriptions` (zset event
 * type → until when (ms) a deliverer's webhooks take it, renewed by each running deliverer: a deletion, made by any
 * caller, records `session.deleted` only where one takes it; once no deliverer renews it, it lapses). `subscribed`:
 * the set that held the types before (never cleared), removed by deliverers.
 */
export type OutboxPart = 'outbox' | 'due' | 'state' | 'claim' | 'target' | 'owed';

/** How long a deleted session's webhook target is kept (the longest `webhookDelivery.maxAgeMs`). */
export const TARGET_KEEP_MS = 30 * 24 * 3600_000;

export function outboxKey(keys: Keys, sessionId: string, part: OutboxPart): string {
  return `${keys.prefix}:{s:${sessionId}}:wh-${part}`;
}

export function webhookFleetKeys(keys: Keys): {
  markers: string;
  dead: string;
  deadSeq: string;
  subscriptions: string;
  subscribed: string;
} {
  return {
    markers: `{${keys.prefix}}:wh-markers`,
    dead: `{${keys.prefix}}:wh-dead`,
    deadSeq: `{${keys.prefix}}:wh-dead-seq`,
    subscriptions: `{${keys.prefix}}:wh-subscriptions`,
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
