import { InputError } from '../errors.ts';
import { internals } from '../runtime/internals.ts';
import {
  deadLetters,
  deliversWebhooks,
  parseSince,
  pendingWebhooks,
  replayDeadLetters,
  WebhookOutbox,
  type DeadLetter,
  type Since,
  type WebhookSettings,
} from '../runtime/webhooks/outbox.ts';
import { runtimeOf } from './bind.ts';
import type { Client } from './client.ts';

/**
 * Delivers the deployment's webhook events from this process too (`sessiond serve` runs one beside
 * the workers'; see docs/operations/webhooks.md). null when no webhook is configured and the policy lets sessions
 * have none of their own (`settings.sessionHosts`: the policy's `webhooks.hosts`).
 */
export function startWebhookDelivery(
  client: Client,
  settings: WebhookSettings,
  log: (level: 'info' | 'warn' | 'error', message: string, fields?: Record<string, unknown>) => void,
): { close(): Promise<void> } | null {
  if (!deliversWebhooks(settings)) return null;
  const parts = internals(runtimeOf(client));
  const outbox = new WebhookOutbox(parts.redis, parts.keys, settings, log);
  outbox.start();
  return outbox;
}

export type { DeadLetter };

/** `since` as the CLI and the API take it: a dead letter's number, or an ISO 8601 time (InputError naming `since`). */
export function webhookSince(text: string): Since {
  const parsed = parseSince(text);
  if (parsed === null)
    throw new InputError([
      { field: 'since', message: `must be a dead-letter number or an ISO 8601 time (got "${text}")` },
    ]);
  return parsed;
}

/** The dead letters (oldest first), from a dead-letter number or a time when `since` is given. */
export function webhookDeadLetters(client: Client, since?: string): Promise<DeadLetter[]> {
  const parts = internals(runtimeOf(client));
  return deadLetters(parts.redis, parts.keys, since === undefined ? undefined : webhookSince(since));
}

/** Puts the dead letters from `since` back for delivery (same webhook-id, retried from zero); → how many. */
export async function replayWebhooks(client: Client, since: string): Promise<{ replayed: number }> {
  const parts = internals(runtimeOf(client));
  return { replayed: await replayDeadLetters(parts.redis, parts.keys, webhookSince(since)) };
}

/** Sessions with webhook events waiting for delivery, and when their next attempt is due (ms). */
export function pendingWebhookEvents(
  client: Client,
): Promise<Array<{ sessionId: string; waiting: number; nextAt: number | null }>> {
  const parts = internals(runtimeOf(client));
  return pendingWebhooks(parts.redis, parts.keys);
}
