import { internals } from '../runtime/internals.ts';
import { WebhookOutbox, type WebhookSettings } from '../runtime/webhooks/outbox.ts';
import { runtimeOf } from './bind.ts';
import type { Client } from './client.ts';

/**
 * Delivers the deployment's webhook events from this process too (`sessiond serve` runs one beside
 * the workers'; see docs/operations/webhooks.md). null when no webhook is configured.
 */
export function startWebhookDelivery(
  client: Client,
  settings: WebhookSettings,
  log: (level: 'info' | 'warn' | 'error', message: string, fields?: Record<string, unknown>) => void,
): { close(): Promise<void> } | null {
  if (settings.webhooks.length === 0) return null;
  const parts = internals(runtimeOf(client));
  const outbox = new WebhookOutbox(parts.redis, parts.keys, settings, log);
  outbox.start();
  return outbox;
}
