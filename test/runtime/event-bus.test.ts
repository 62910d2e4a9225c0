import { once } from 'node:events';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventBus, type BusEvent } from '../../src/runtime/event-bus.ts';
import { createKeys } from '../../src/runtime/keys.ts';
import { createRedis } from '../../src/runtime/redis/connection.ts';
import { startRedis, uniquePrefix, type RedisServer } from '../support/redis.ts';
import { until } from '../support/runtime.ts';

let redis: RedisServer;
let admin: Redis;
const made: Redis[] = [];

beforeAll(async () => {
  redis = await startRedis();
  admin = track(new Redis(redis.url));
});

afterAll(async () => {
  for (const client of made) client.disconnect();
  await redis.stop();
});

function track(client: Redis): Redis {
  client.on('error', () => undefined);
  made.push(client);
  return client;
}

/**
 * A bus on `subscriber`, started the moment that connection's socket is up, while it still makes its handshake; then,
 * once the connection is ready (as it is after any reconnect its handshake caused), one event published to it.
 */
async function startedWhileConnecting(subscriber: Redis): Promise<{ subscribers: number; got: BusEvent }> {
  const keys = createKeys(uniquePrefix('bus'));
  const bus = new EventBus(subscriber, track(new Redis(redis.url)), keys);
  await once(subscriber, 'connect');
  expect(subscriber.status).toBe('connect');
  await bus.start();
  await until(async () => subscriber.status === 'ready', 5000, 'the subscriber connection to be ready');
  const [, subscribers] = (await admin.pubsub('NUMSUB', keys.events)) as [string, number];
  const event: BusEvent = { sessionId: 's', kind: 'delete' };
  const got = new Promise<BusEvent>((resolve) => bus.on(event.sessionId, resolve));
  await bus.publish(event);
  return { subscribers, got: subscribers === 0 ? event : await got };
}

describe('the event bus', () => {
  // A SUBSCRIBE sent during the connection's handshake was lost without an error (event-bus.ts: ready()), so a
  // worker whose start got there early never heard a cancel or a delete of its sessions: a forced delete waited
  // out its 15 s and took the lease away while the agent still ran.
  it('started while its connection makes its handshake: subscribed once the connection is ready, and gets its events', async () => {
    const production = track(createRedis(redis.url, { role: 'test:bus-events', log: () => undefined }));
    expect(await startedWhileConnecting(production)).toEqual({
      subscribers: 1,
      got: { sessionId: 's', kind: 'delete' },
    });
    // The tests' own connections (test/support/runtime.ts) are named too: the handshake is the same.
    const named = track(new Redis(redis.url, { connectionName: 'test:bus', maxRetriesPerRequest: null }));
    expect(await startedWhileConnecting(named)).toEqual({ subscribers: 1, got: { sessionId: 's', kind: 'delete' } });
  });

  it('a lazy connection is connected by start', async () => {
    const lazy = track(new Redis(redis.url, { lazyConnect: true }));
    const keys = createKeys(uniquePrefix('bus'));
    const bus = new EventBus(lazy, track(new Redis(redis.url)), keys);
    await bus.start();
    const got = new Promise<BusEvent>((resolve) => bus.on('b', resolve));
    await bus.publish({ sessionId: 'b', kind: 'prompt' });
    expect(await got).toEqual({ sessionId: 'b', kind: 'prompt' });
  });
});
