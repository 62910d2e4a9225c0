import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { loadavg } from 'node:os';
import { Redis } from 'ioredis';
import { WebhookDeliverySchema } from '../src/config/webhooks.ts';
import { createKeys } from '../src/runtime/keys.ts';
import { WebhookOutbox } from '../src/runtime/webhooks/outbox.ts';
import { recordOutboxEvent } from '../test/support/outbox-event.ts';
import { freePort, startRedis } from '../test/support/redis.ts';
import { BenchFailure } from './support/benchmark.ts';

/**
 * Webhook delivery figures (`npm run bench -- webhooks`):
 * one deliverer (as one worker or serve runs) against a real redis-server and a healthy receiver on
 * 127.0.0.1. (1) A backlog of 1,000 events over 100 sessions recorded while the receiver is down:
 * the time to drain it once it is up, events/s. (2) Events recorded at a steady 50/s with the receiver
 * healthy: lag (event time → delivered) p50/p99. Events are put in the outboxes as WRITE puts them
 * (hash + due set + marker), not through sessions' turns: this measures delivery alone.
 */

const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

export const name = 'webhooks';

export async function run(log: (line: string) => void = console.log): Promise<Record<string, unknown>> {
  const server = await startRedis();
  const redis = new Redis(server.url);
  const keys = createKeys(`bench-wh-${randomBytes(3).toString('hex')}`);
  const port = await freePort();
  const arrived = new Map<string, number>();
  /** Requests of an id that had arrived already (this one deliverer never sends an event it was answered 2xx for). */
  let twice = 0;
  let up = false;
  const receiver = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const id = String(req.headers['webhook-id']);
      if (arrived.has(id)) twice += 1;
      else arrived.set(id, Date.now());
      res.writeHead(up ? 204 : 503).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(port, '127.0.0.1', resolve));
  const delivery = WebhookDeliverySchema.parse({
    allowAddresses: ['127.0.0.1'],
    pollMs: 50,
    retryBaseMs: 200,
    retryMaxMs: 1000,
  });
  const outbox = new WebhookOutbox(
    redis,
    keys,
    { webhooks: [{ url: `http://127.0.0.1:${port}/`, secret: SECRET, events: ['turn.ended'] }], delivery },
    () => undefined,
  );
  const record = (sessionId: string, n: number): Promise<string> =>
    recordOutboxEvent(redis, keys, sessionId, { type: 'turn.ended', turn: n });

  // (1) backlog
  const backlog: string[] = [];
  for (let i = 0; i < 1000; i += 1) backlog.push(await record(`s${i % 100}`, i));
  up = true;
  const t0 = Date.now();
  outbox.start();
  while (!backlog.every((id) => arrived.has(id))) await new Promise((r) => setTimeout(r, 20));
  const drainMs = Date.now() - t0;
  const drainLoad = loadavg()[0] ?? 0;
  log(
    `backlog of 1000 events (100 sessions): drained in ${drainMs} ms = ${Math.round(1000 / (drainMs / 1000))} events/s`,
  );

  // (2) steady rate, healthy receiver
  const sent = new Map<string, number>();
  for (let i = 0; i < 500; i += 1) {
    sent.set(await record(`t${i % 50}`, i), Date.now());
    await new Promise((r) => setTimeout(r, 20));
  }
  while (![...sent.keys()].every((id) => arrived.has(id))) await new Promise((r) => setTimeout(r, 20));
  const lags = [...sent].map(([id, at]) => (arrived.get(id) ?? at) - at).sort((a, b) => a - b);
  const q = (p: number) => lags[Math.min(lags.length - 1, Math.floor(p * lags.length))] ?? 0;
  log(
    `steady ~50 events/s, healthy receiver: lag p50 ${q(0.5)} ms, p99 ${q(0.99)} ms, max ${lags.at(-1)} ms (pollMs 50)`,
  );
  log(
    `load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}`,
  );
  await outbox.close();
  receiver.close();
  redis.disconnect();
  await server.stop();
  // Every event once: a figure over events that never arrived, or arrived twice, would mean nothing.
  if (arrived.size !== backlog.length + sent.size || twice > 0)
    throw new BenchFailure(
      `${arrived.size} distinct events arrived (${twice} again), ${backlog.length + sent.size} recorded`,
    );
  return {
    backlogEvents: backlog.length,
    drainMs,
    drainEventsPerSec: Math.round(1000 / (drainMs / 1000)),
    steadyEvents: sent.size,
    lagP50Ms: q(0.5),
    lagP99Ms: q(0.99),
    lagMaxMs: lags.at(-1) ?? 0,
    load1: { drain: Number(drainLoad.toFixed(1)), end: Number((loadavg()[0] ?? 0).toFixed(1)) },
  };
}
