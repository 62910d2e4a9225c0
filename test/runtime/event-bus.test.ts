import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventBus, type BusEvent } from '../../src/runtime/event-bus.ts';
import { createKeys } from '../../src/runtime/keys.ts';
import { createRedis } from '../../src/runtime/redis/connection.ts';
import { startRedis, uniquePrefix, type RedisServer } from '../support/redis.ts';

/**
 * The bus's subscription against a real redis-server. A SUBSCRIBE sent between the connection's TCP connect
 * and its ready check used to reach Redis at once (ioredis lets it through while Redis loads); its reply then put
 * the connection in subscriber mode before the ready check's INFO, which ioredis refused ("Connection in
 * subscriber mode"): the connection was dropped and made again, and the events published meanwhile were lost
 * (a queued prompt's removal then waited for a holder that never heard of it).
 */

let redis: RedisServer;

beforeAll(async () => {
  redis = await startRedis();
});

afterAll(async () => {
  await redis?.stop();
});

describe('EventBus', () => {
  it('started while its connection is between connect and ready: no error, no reconnect, and it hears events', async () => {
    const keys = createKeys(uniquePrefix('bus'));
    const logged: string[] = [];
    const subscriber = createRedis(redis.url, { role: 'bus-test', log: (line) => logged.push(line) });
    const publisher = createRedis(redis.url, { role: 'bus-test-pub' });
    let reconnects = 0;
    subscriber.on('reconnecting', () => (reconnects += 1));
    const bus = new EventBus(subscriber, publisher, keys);
    // The window of the race: ioredis says 'connect' before it names the connection and checks it is ready.
    const started = await new Promise<Promise<void>>((resolve) =>
      subscriber.once('connect', () => {
        expect(subscriber.status).toBe('connect');
        resolve(bus.start());
      }),
    );
    await started;
    const heard: BusEvent[] = [];
    bus.on('s1', (event) => heard.push(event));
    await bus.publish({ sessionId: 's1', kind: 'unqueue' });
    // A round trip on the subscriber after the publish: the message, sent before its reply, has been read.
    await subscriber.ping();
    expect(heard).toEqual([{ sessionId: 's1', kind: 'unqueue' }]);
    expect(logged).toEqual([]);
    expect(reconnects).toBe(0);
    subscriber.disconnect();
    publisher.disconnect();
  });
});
