import { Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import fc from 'fast-check';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  createRedis,
  forBullMQ,
  parseRedisUrl,
  reconnectDelay,
  redactUrl,
  RECONNECT_MAX_DELAY_MS,
} from '../../../src/runtime/redis/connection.ts';
import { startRedis, uniquePrefix, type RedisServer } from '../../support/redis.ts';

function options(url: string): Record<string, unknown> {
  const parsed = parseRedisUrl(url);
  if (!parsed.ok) throw new Error(parsed.message);
  return parsed.options as Record<string, unknown>;
}

describe('parseRedisUrl accepts', () => {
  it.each([
    ['redis://localhost', { host: 'localhost', port: 6379, db: 0 }, 'redis://localhost:6379/0'],
    ['redis://127.0.0.1:6380/', { host: '127.0.0.1', port: 6380, db: 0 }, 'redis://127.0.0.1:6380/0'],
    ['redis://h:7000/15', { host: 'h', port: 7000, db: 15 }, 'redis://h:7000/15'],
    ['redis://:secret@h:1', { host: 'h', port: 1, password: 'secret' }, 'redis://:***@h:1/0'],
    [
      'redis://alice:secret@h:65535/2',
      { username: 'alice', password: 'secret', port: 65535, db: 2 },
      'redis://alice:***@h:65535/2',
    ],
    ['redis://alice@h', { username: 'alice' }, 'redis://alice@h:6379/0'],
    ['redis://:p%40ss%3Aw%2Frd%25@h', { password: 'p@ss:w/rd%' }, 'redis://:***@h:6379/0'],
    ['redis://[::1]:7001/3', { host: '::1', port: 7001, db: 3 }, 'redis://[::1]:7001/3'],
    ['REDIS://Host.Example.com', { host: 'Host.Example.com' }, 'redis://Host.Example.com:6379/0'],
    ['  redis://h:6379  ', { host: 'h' }, 'redis://h:6379/0'],
  ])('%s', (url, expected, display) => {
    const parsed = parseRedisUrl(url);
    expect(parsed).toMatchObject({ ok: true, options: expected, display });
    expect(options(url).tls).toBeUndefined();
  });

  it('rediss:// turns TLS on, with SNI for a host name and none for an IP address', () => {
    expect(options('rediss://:pw@cache.example.com:6380')).toMatchObject({
      host: 'cache.example.com',
      port: 6380,
      tls: { servername: 'cache.example.com' },
    });
    expect(options('rediss://10.0.0.5')).toMatchObject({ tls: {} });
    expect(options('rediss://10.0.0.5').tls).not.toHaveProperty('servername');
    expect(parseRedisUrl('rediss://u:pw@h')).toMatchObject({ display: 'rediss://u:***@h:6379/0' });
  });
});

describe('parseRedisUrl rejects, with a clear message', () => {
  it.each([
    ['', /empty/],
    ['   ', /empty/],
    ['localhost:6379', /missing scheme.*redis:\/\//],
    ['http://localhost:6379', /unsupported scheme "http:\/\/".*redis:\/\/ or rediss:\/\//],
    ['redis://h:0', /port must be an integer from 1 to 65535 \(got "0"\)/],
    ['redis://h:65536', /port must be .* \(got "65536"\)/],
    ['redis://h:99999999', /port must be/],
    ['redis://h:abc', /port must be .* \(got "abc"\)/],
    ['redis://[::1', /IPv6/],
    ['redis://', /missing host/],
    ['redis://:pw@', /missing host/],
    ['redis://:pw@:6379/0', /missing host/],
    ['redis://h/x', /database number like \/0 \(got "\/x"\)/],
    ['redis://h/-1', /database number/],
    ['redis://h/1/2', /database number/],
    ['redis://h/99999999999', /database number/],
    ['redis://h/0?family=6', /query parameters/],
    ['redis://h/0#frag', /query parameters/],
    ['redis://:pass/word@h', /reserved character.*percent-encode/],
    ['redis://:pa?ss@h', /reserved character/],
    ['redis://:p%zzw@h', /invalid percent-encoding/],
  ])('%j', (url, message) => {
    const parsed = parseRedisUrl(url);
    expect(parsed.ok).toBe(false);
    if (parsed.ok) return;
    expect(parsed.message).toMatch(/^invalid Redis URL: /);
    expect(parsed.message).toMatch(message);
  });

  it('never quotes the password in a message', () => {
    for (const url of [
      'redis://:s3cr3tPW/x@h',
      'redis://:s3cr3tPW@h:abc',
      'redis://:s3cr3tPW@h/x',
      'redis://:s3cr3tPW%zz@h',
      'redis://u:s3cr3tPW@h?x=1',
    ]) {
      const parsed = parseRedisUrl(url);
      expect(parsed.ok).toBe(false);
      if (!parsed.ok) expect(parsed.message).not.toContain('s3cr3tPW');
    }
  });
});

describe('redaction', () => {
  const HOST = 'redis.example.com:6380/2';

  it('redactUrl masks the password of valid and invalid URLs', () => {
    expect(redactUrl('redis://u:hunter22@h:1/0')).toBe('redis://u:***@h:1/0');
    expect(redactUrl('redis://:hunter22/x@h')).toBe('redis://***@h');
    expect(redactUrl('redis://:hunter22@h:notaport')).toBe('redis://***@h:notaport');
    expect(redactUrl('redis://h:6379')).toBe('redis://h:6379/0');
    expect(redactUrl('user:hunter22@host')).toBe('<invalid url>');
  });

  it('property: the display of a percent-encoded URL never contains a password of ≥ 4 chars, and the password round-trips', () => {
    fc.assert(
      fc.property(
        fc.string({ minLength: 4, maxLength: 40, unit: 'binary' }),
        fc.constantFrom('', 'default', 'app'),
        (password, user) => {
          const url = `redis://${user}:${encodeURIComponent(password)}@${HOST}`;
          const placeholder = `redis://${user}:***@${HOST}`;
          fc.pre(!placeholder.includes(password));
          const parsed = parseRedisUrl(url);
          expect(parsed.ok).toBe(true);
          if (!parsed.ok) return;
          expect(parsed.options.password).toBe(password);
          expect(parsed.display).not.toContain(password);
          expect(redactUrl(url)).not.toContain(password);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('property: a password pasted without encoding never shows in redactUrl or in an error message', () => {
    const printable = fc.string({
      minLength: 4,
      maxLength: 40,
      unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)),
    });
    fc.assert(
      fc.property(fc.oneof(printable, fc.string({ minLength: 4, maxLength: 40, unit: 'grapheme' })), (password) => {
        const url = `redis://default:${password}@${HOST}`;
        fc.pre(!`redis://default:***@${HOST}`.includes(password) && !`redis://***@${HOST}`.includes(password));
        expect(redactUrl(url)).not.toContain(password);
        const parsed = parseRedisUrl(url);
        if (parsed.ok) expect(parsed.display).not.toContain(password);
        else expect(parsed.message).not.toContain(password);
      }),
      { numRuns: 500 },
    );
  });
});

describe('reconnectDelay', () => {
  it('grows exponentially from ~50 ms and is capped at 2 s (±10 %)', () => {
    expect(reconnectDelay(1, () => 0.5)).toBe(50);
    expect(reconnectDelay(2, () => 0.5)).toBe(100);
    expect(reconnectDelay(5, () => 0.5)).toBe(800);
    expect(reconnectDelay(6, () => 0.5)).toBe(1600);
    expect(reconnectDelay(7, () => 0.5)).toBe(RECONNECT_MAX_DELAY_MS);
    expect(reconnectDelay(10_000, () => 1)).toBe(2200);
    expect(reconnectDelay(10_000, () => 0)).toBe(1800);
  });
});

describe('createRedis against a real server', () => {
  const PASSWORD = 'pa ss:w/rd@%-9';
  let server: RedisServer;
  const clients: Redis[] = [];
  const track = <T extends Redis>(client: T): T => {
    clients.push(client);
    return client;
  };

  beforeAll(async () => {
    server = await startRedis({ password: PASSWORD, aof: true });
  });
  afterEach(() => {
    for (const client of clients.splice(0)) client.disconnect();
  });
  afterAll(async () => {
    await server.stop();
  });

  it('connects with the password from the URL and names the connection sessiond:<role>', async () => {
    const redis = track(createRedis(server.url, { role: 'api' }));
    expect(await redis.ping()).toBe('PONG');
    expect(await redis.client('GETNAME')).toBe('sessiond:api');
    expect(redis.options.maxRetriesPerRequest).toBe(20);
    expect(redis.options.enableReadyCheck).toBe(true);
  });

  it('lazyConnect waits for the first command', async () => {
    const redis = track(createRedis(server.url, { role: 'lazy', lazyConnect: true }));
    expect(redis.status).toBe('wait');
    expect(await redis.ping()).toBe('PONG');
    expect(redis.status).toBe('ready');
  });

  it('rejects an invalid URL or role without quoting the password', () => {
    expect(() => createRedis('redis://:hunter22@h:0', { role: 'x' })).toThrow(/port must be/);
    expect(() => createRedis('redis://:hunter22@h:0', { role: 'x' })).not.toThrow(/hunter22/);
    expect(() => createRedis(server.url, { role: 'has space' })).toThrow(/invalid Redis connection role/);
  });

  it('a wrong password: errors are logged (rate-limited, without the password), the process does not crash', async () => {
    const lines: string[] = [];
    const wrong = 'Wr0ngPassword!';
    const redis = track(
      createRedis(`redis://:${encodeURIComponent(wrong)}@127.0.0.1:${server.port}`, {
        role: 'bad',
        log: (l) => lines.push(l),
        maxRetriesPerRequest: 0,
      }),
    );
    await expect(redis.ping()).rejects.toThrow();
    await new Promise((r) => setTimeout(r, 500));
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.length).toBeLessThanOrEqual(2);
    for (const line of lines) {
      expect(line).toContain('[sessiond:bad]');
      expect(line).toContain(`redis://:***@127.0.0.1:${server.port}/0`);
      expect(line).not.toContain(wrong);
      expect(line).not.toContain(encodeURIComponent(wrong));
    }
  });

  it('survives a server restart: a command sent while it is down completes after; one line per distinct error', async () => {
    const lines: string[] = [];
    const redis = track(createRedis(server.url, { role: 'restart', log: (l) => lines.push(l) }));
    const key = `${uniquePrefix('reconnect')}:k`;
    await redis.set(key, '1');
    await server.kill();
    await new Promise((r) => setTimeout(r, 600)); // several reconnect attempts, all refused
    const pending = redis.incr(key);
    await server.restart();
    expect(await pending).toBe(2);
    const errors = lines.filter((l) => l.includes('ECONNREFUSED'));
    expect(errors.length).toBe(1);
    expect(lines.some((l) => /connected again \(\d+ similar errors not shown\)/.test(l))).toBe(true);
    for (const line of lines) expect(line).not.toContain(PASSWORD);
  });

  it('commands issued in one tick leave in one socket write, replies in order; so after a reconnect too', async () => {
    const redis = track(createRedis(server.url, { role: 'coalesce' }));
    const key = `${uniquePrefix('coalesce')}:n`;
    await redis.ping();
    const countWrites = async (): Promise<{ writes: number; replies: number[] }> => {
      const stream = redis.stream as unknown as { _writev: unknown; _write: unknown };
      let writes = 0;
      const writev = stream._writev as (...args: unknown[]) => unknown;
      const write = stream._write as (...args: unknown[]) => unknown;
      stream._writev = function (this: unknown, ...args: unknown[]) {
        writes += 1;
        return writev.apply(this, args);
      };
      stream._write = function (this: unknown, ...args: unknown[]) {
        writes += 1;
        return write.apply(this, args);
      };
      try {
        const replies = await Promise.all(Array.from({ length: 50 }, () => redis.incr(key)));
        return { writes, replies };
      } finally {
        stream._writev = writev;
        stream._write = write;
      }
    };
    const first = await countWrites();
    expect(first.writes).toBe(1);
    expect(first.replies).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));

    await server.restart();
    await redis.ping();
    const second = await countWrites();
    expect(second.writes).toBe(1);
    expect(second.replies).toEqual(Array.from({ length: 50 }, (_, i) => i + 51));
  });

  it('forBullMQ: maxRetriesPerRequest null, and a BullMQ worker processes a job through it', async () => {
    const prefix = uniquePrefix('bullmq');
    const queueConnection = track(forBullMQ(server.url, { role: 'queue' }));
    const workerConnection = track(forBullMQ(server.url, { role: 'worker' }));
    expect(workerConnection.options.maxRetriesPerRequest).toBeNull();
    const queue = new Queue('q', { connection: queueConnection, prefix });
    const worker = new Worker('q', async (job) => `done:${String(job.data.n)}`, {
      connection: workerConnection,
      prefix,
    });
    try {
      const finished = new Promise<unknown>((resolve) => worker.on('completed', (_job, result) => resolve(result)));
      await queue.add('j', { n: 7 });
      expect(await finished).toBe('done:7');
    } finally {
      await worker.close();
      await queue.close();
    }
  });

  it('a client told to stop while it waits to reconnect ends: its queued command fails, and a BullMQ worker closes', async () => {
    const prefix = uniquePrefix('closing');
    const plain = track(createRedis(server.url, { role: 'plain', log: () => undefined }));
    const workerConnection = track(forBullMQ(server.url, { role: 'worker', log: () => undefined }));
    const worker = new Worker('q', async () => 'done', { connection: workerConnection, prefix });
    await worker.waitUntilReady();
    await plain.ping();
    await server.kill();
    try {
      // Every connection, the worker's blocking one too, waits to reconnect.
      const reconnecting = (client: Redis): Promise<void> =>
        client.status === 'reconnecting' ? Promise.resolve() : new Promise((r) => client.once('reconnecting', r));
      const blocking = await (worker as unknown as { blockingConnection: { client: Promise<Redis> } })
        .blockingConnection.client;
      await Promise.all([plain, blocking].map(reconnecting));
      const queued = plain.get('k');
      const ended = new Promise<void>((r) => plain.once('end', () => r()));
      plain.disconnect();
      await expect(queued).rejects.toThrow('Connection is closed.');
      await ended;
      expect(plain.status).toBe('end');
      // BullMQ disconnects its blocking connection and waits for its end: without the mend, forever.
      const closed = await Promise.race([
        worker.close().then(() => 'closed'),
        new Promise((r) => setTimeout(r, 20_000, 'still closing after 20 s')),
      ]);
      expect(closed).toBe('closed');
    } finally {
      await server.restart();
    }
  });
});
