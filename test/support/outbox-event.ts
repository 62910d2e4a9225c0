import type { Redis } from 'ioredis';
import type { Keys } from '../../src/runtime/keys.ts';
import { eventId, outboxKey, webhookFleetKeys } from '../../src/runtime/webhooks/outbox-keys.ts';

/**
 * An event put in a session's webhook outbox as WRITE puts it (hash + due set + marker), not through a turn: for the
 * deliverer's tests and benchmark. → its id.
 */
export async function recordOutboxEvent(
  redis: Redis,
  keys: Keys,
  sessionId: string,
  event: { type: string; turn: number },
): Promise<string> {
  const id = eventId();
  const at = Date.now();
  const body = JSON.stringify({ type: event.type, id, sessionId, turn: event.turn, at: new Date(at).toISOString() });
  await redis.zadd(webhookFleetKeys(keys).markers, at, sessionId);
  await redis
    .multi()
    .hset(outboxKey(keys, sessionId, 'outbox'), id, body)
    .zadd(outboxKey(keys, sessionId, 'due'), at, id)
    .exec();
  return id;
}
