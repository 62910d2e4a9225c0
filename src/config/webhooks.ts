import { isIP } from 'node:net';
import { z } from 'zod';

/**
 * Operator webhooks (SESSIOND_WEBHOOKS, `webhooks` in the config file, JSON): each endpoint gets the
 * events it names, signed per the Standard Webhooks specification with each of its secrets (several
 * during a rotation). Delivery settings: `webhookDelivery` (SESSIOND_WEBHOOK_DELIVERY, JSON).
 */

export const WEBHOOK_EVENTS = [
  'turn.started',
  'turn.ended',
  'approval.requested',
  'session.parked',
  'session.deleted',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENTS)[number];

const secret = z
  .string()
  .regex(/^whsec_[A-Za-z0-9+/]{16,}={0,2}$/, 'must be whsec_ followed by base64 of at least 12 bytes');

export const WebhookSchema = z.strictObject({
  /** Where events are POSTed: http:// or https://. */
  url: z
    .string()
    .max(2048, 'must be at most 2048 characters')
    .refine((u) => {
      try {
        const p = new URL(u).protocol;
        return p === 'http:' || p === 'https:';
      } catch {
        // Not a URL: refused with this field's message.
        return false;
      }
    }, 'must be an http:// or https:// URL'),
  /** `whsec_…` (base64 after the prefix); a list during a rotation: each delivery carries one signature per secret. */
  secret: z.union([secret, z.array(secret).min(1, 'must name at least one secret').max(8)]),
  /** Which events it gets. */
  events: z.array(z.enum(WEBHOOK_EVENTS)).min(1, 'must name at least one event'),
});
export type Webhook = z.infer<typeof WebhookSchema>;

export const WebhookListSchema = z.array(WebhookSchema).max(32, 'at most 32 webhooks');

const ms = (min: number, max: number, fallback: number) =>
  z
    .number({ error: `must be a number of milliseconds from ${min} to ${max}` })
    .int()
    .min(min, `must be at least ${min} ms`)
    .max(max, `must be at most ${max} ms`)
    .default(fallback);

export const WEBHOOK_DELIVERY_DEFAULTS = {
  maxAgeMs: 3 * 24 * 3600_000,
  timeoutMs: 10_000,
  maxBytes: 256 * 1024,
  pollMs: 500,
  retryBaseMs: 1_000,
  retryMaxMs: 3600_000,
  maxDead: 10_000,
  maxPerSession: 10_000,
} as const;

/** An IPv4/IPv6 address or CIDR block (`127.0.0.1`, `10.0.0.0/8`). */
const addressOrBlock = z.string().refine((s) => {
  const [address, bits, ...rest] = s.split('/');
  if (rest.length > 0 || address === undefined) return false;
  const family = isIP(address);
  if (family === 0) return false;
  if (bits === undefined) return true;
  const n = Number(bits);
  return /^\d+$/.test(bits) && n <= (family === 4 ? 32 : 128);
}, 'must be an IP address or a CIDR block such as 10.0.0.0/8');

export const WebhookDeliverySchema = z.strictObject({
  /** Retried for this long after the event, then a dead letter (ms; default 3 days). */
  maxAgeMs: ms(1_000, 30 * 24 * 3600_000, WEBHOOK_DELIVERY_DEFAULTS.maxAgeMs),
  /** One delivery's time limit, connection to response (ms). */
  timeoutMs: ms(100, 120_000, WEBHOOK_DELIVERY_DEFAULTS.timeoutMs),
  /** The most bytes of one event's body sent, and of a response read. */
  maxBytes: z
    .number()
    .int()
    .min(1024)
    .max(16 * 1024 * 1024)
    .default(WEBHOOK_DELIVERY_DEFAULTS.maxBytes),
  /** How often each process looks for events due. */
  pollMs: ms(10, 60_000, WEBHOOK_DELIVERY_DEFAULTS.pollMs),
  /** The first retry's delay; doubled each attempt (with jitter) up to retryMaxMs. */
  retryBaseMs: ms(10, 3600_000, WEBHOOK_DELIVERY_DEFAULTS.retryBaseMs),
  retryMaxMs: ms(10, 24 * 3600_000, WEBHOOK_DELIVERY_DEFAULTS.retryMaxMs),
  /** Dead letters kept (the oldest go first). */
  maxDead: z.number().int().min(1).max(1_000_000).default(WEBHOOK_DELIVERY_DEFAULTS.maxDead),
  /** Events waiting per session; beyond it a new event is dropped and counted (`webhooks|dropped`). */
  maxPerSession: z.number().int().min(1).max(1_000_000).default(WEBHOOK_DELIVERY_DEFAULTS.maxPerSession),
  /** Loopback, link-local and private addresses allowed as destinations (refused otherwise). */
  allowAddresses: z.array(addressOrBlock).max(100).default([]),
});
export type WebhookDelivery = z.infer<typeof WebhookDeliverySchema>;
