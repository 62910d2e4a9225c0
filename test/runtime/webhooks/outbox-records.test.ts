import { tmpdir } from 'node:os';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { WebhookDeliverySchema } from '../../../src/config/webhooks.ts';
import { deploymentPolicy } from '../../../src/runtime/deployment-policy.ts';
import { createKeys } from '../../../src/runtime/keys.ts';
import { Runtime } from '../../../src/runtime/runtime.ts';
import { deletedEvent } from '../../../src/runtime/webhooks/deleted.ts';
import { outboxKey } from '../../../src/runtime/webhooks/outbox-keys.ts';
import { WebhookOutbox } from '../../../src/runtime/webhooks/outbox.ts';
import { recordOutboxEvent } from '../../support/outbox-event.ts';
import { freePort, startRedis, uniquePrefix, type RedisServer } from '../../support/redis.ts';
import { connector } from '../../support/runtime.ts';
import { validSignatures, WebhookReceiver, type ReceivedWebhook } from '../../support/webhook-receiver.ts';

/**
 * What the webhook deliverer records and whom it sends to, on a real redis-server with receivers on 127.0.0.1:
 * events waiting when a session's webhook is replaced go to the webhook they were recorded for, signed with its
 * secret; the record of the event types the deliverers take lapses once no deliverer renews it.
 */

let redis: RedisServer;
let connect: ReturnType<typeof connector>['connect'];
let closeAll: () => void;
const receivers: WebhookReceiver[] = [];

beforeAll(async () => {
  redis = await startRedis();
  ({ connect, closeAll } = connector(redis.url));
});
afterEach(() => {
  vi.useRealTimers();
});
afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  closeAll();
  await redis.stop();
});

const delivery = WebhookDeliverySchema.parse({ allowAddresses: ['127.0.0.1'], pollMs: 50 });

describe('webhook deliverer records', () => {
  it("events waiting when a session's webhook is replaced go to the one they were recorded for, signed with its secret; the new one gets only later events", async () => {
    const [a, b] = [new WebhookReceiver(await freePort()), new WebhookReceiver(await freePort())];
    receivers.push(a, b);
    await Promise.all([a.listen(), b.listen()]);
    const prefix = uniquePrefix('wh-replace');
    const hosts = [`127.0.0.1:${a.port}`, `127.0.0.1:${b.port}`];
    const policy = deploymentPolicy({ workspace: tmpdir(), policy: { webhooks: { hosts } } });
    const runtime = new Runtime({ connect, prefix, policy });
    const conn = connect('test');
    const first = await runtime.enqueue({ prompt: 'one', options: { model: 'm' }, webhook: a.url });
    const { sessionId } = first;
    const before = await recordOutboxEvent(conn, createKeys(prefix), sessionId, { type: 'turn.started', turn: 1 });
    const second = await runtime.enqueue({ sessionId, prompt: 'two', webhook: b.url });
    const after = await recordOutboxEvent(conn, createKeys(prefix), sessionId, { type: 'turn.ended', turn: 1 });

    const outbox = new WebhookOutbox(
      conn,
      createKeys(prefix),
      { webhooks: [], delivery, sessionHosts: policy.webhookHosts ?? [] },
      () => {
        // Nothing to log in this test.
      },
    );
    await outbox.pass();
    await outbox.close();

    expect(a.requests.map((r) => r.id)).toEqual([before]);
    expect(validSignatures(a.requests[0] as ReceivedWebhook, [first.webhookSecret as string])).toBe(1);
    expect(b.requests.map((r) => r.id)).toEqual([after]);
    expect(validSignatures(b.requests[0] as ReceivedWebhook, [second.webhookSecret as string])).toBe(1);
    // Delivered: nothing of either event is left (its owed entry included).
    const keys = createKeys(prefix);
    expect(await conn.exists(outboxKey(keys, sessionId, 'outbox'), outboxKey(keys, sessionId, 'owed'))).toBe(0);
    await runtime.close();
  });

  it('the event types a deliverer takes lapse maxAgeMs after it stopped renewing them: a deletion then records no session.deleted', async () => {
    const prefix = uniquePrefix('wh-lapse');
    const keys = createKeys(prefix);
    const conn = connect('test');
    vi.useFakeTimers({ toFake: ['Date'] });
    const started = Date.now();
    const outbox = new WebhookOutbox(
      conn,
      keys,
      {
        webhooks: [
          { url: 'http://127.0.0.1:9/hook', secret: 'whsec_c2VjcmV0c2VjcmV0c2VjcmV0', events: ['session.deleted'] },
        ],
        delivery,
      },
      () => undefined,
    );
    outbox.start();
    await outbox.close();
    // Renewed while it ran: a deletion now records the event.
    const about = { mode: 'finished' } as const;
    expect(
      await vi.waitFor(() => deletedEvent(conn, keys, 'gone-1', about).then((e) => e ?? Promise.reject())),
    ).not.toBeNull();
    // No deliverer takes session.deleted any more (its webhooks removed from the configuration) past maxAgeMs.
    vi.setSystemTime(started + delivery.maxAgeMs + 1);
    expect(await deletedEvent(conn, keys, 'gone-2', about)).toBeNull();
  });
});
