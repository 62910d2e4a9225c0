import type { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { createClient } from '../../../src/index.ts';
import { startWebhookDelivery } from '../../../src/api/webhooks.ts';
import { loadConfig } from '../../../src/config/config.ts';
import { internals } from '../../../src/runtime/internals.ts';
import { createRedis } from '../../../src/runtime/redis/connection.ts';
import { outboxKey, webhookFleetKeys } from '../../../src/runtime/webhooks/outbox-keys.ts';
import { deadLetters, replayDeadLetters } from '../../../src/runtime/webhooks/outbox.ts';
import { counterTotals } from '../../../src/runtime/counters.ts';
import { freePort } from '../../support/redis.ts';
import { BACKENDS, turnEnded, until, type Harness, useRuntimeSuite } from '../../support/runtime.ts';
import type { PiEnv } from '../../support/pi-env.ts';
import { validSignatures, WebhookReceiver } from '../../support/webhook-receiver.ts';
import { killAllWorkerProcesses, startWorkerProcess, type WorkerProcessOptions } from '../../support/worker-process.ts';

/**
 * Webhooks end to end: real `sessiond worker` processes, real Redis, real pi against the fake model,
 * and a real HTTP receiver on 127.0.0.1 whose signatures are checked here with node:crypto, as the
 * Standard Webhooks specification says, independently of sessiond's signing code.
 */

const MODEL = 'webhooks-text';
const SECRETS = ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'whsec_c2VjcmV0c2VjcmV0c2VjcmV0'];
const EVENTS = ['turn.started', 'turn.ended', 'approval.requested', 'session.parked', 'session.deleted'];

let env: PiEnv;
let h: Harness;
let redisUrl: string;
let redis: Redis;
/** Stops the in-process deliverers a test started (as serve runs them). */
let closeServes: () => Promise<void> = async () => undefined;

function worker(port: number, extra: Record<string, unknown> = {}): WorkerProcessOptions {
  return {
    redisUrl,
    prefix: h.prefix,
    env,
    stateDir: h.stateDir,
    leaseTtl: '2s',
    stalledInterval: '1s',
    extraEnv: {
      SESSIOND_WEBHOOKS: JSON.stringify([{ url: `http://127.0.0.1:${port}/hook`, secret: SECRETS, events: EVENTS }]),
      SESSIOND_WEBHOOK_DELIVERY: JSON.stringify({
        allowAddresses: ['127.0.0.1'],
        retryBaseMs: 100,
        retryMaxMs: 400,
        pollMs: 100,
        timeoutMs: 2000,
        ...extra,
      }),
    },
  };
}

async function lastSeq(sessionId: string): Promise<number> {
  const messages = await h.runtime.readMessages(sessionId);
  return messages.at(-1)?.seq ?? -1;
}

describe.each(BACKENDS)('webhooks on %s Redis', (backend) => {
  useRuntimeSuite(
    `webhooks-${backend}`,
    {
      backend,
      scripts: { [MODEL]: [{ text: ['Hello', ' from', ' the', ' webhooks', ' test'] }] },
      cleanup: async () => {
        await killAllWorkerProcesses();
        redis?.disconnect();
      },
    },
    (s) => {
      ({ env, h } = s);
      redisUrl = s.redis.url;
      redis = createRedis(redisUrl, { role: 'webhooks-test' });
    },
  );
  afterEach(async () => {
    await closeServes();
    closeServes = async () => undefined;
    await killAllWorkerProcesses();
  });

  it('every event arrives, signed, once per webhook-id, through a receiver that answers 503, then refuses, then comes back; two workers and two serve deliverers never deliver one event twice', async () => {
    const receiver = new WebhookReceiver(await freePort(), 30);
    receiver.status = 503;
    await receiver.listen();
    await Promise.all([startWorkerProcess(worker(receiver.port)), startWorkerProcess(worker(receiver.port))]);
    // Two deliverers as `sessiond serve` starts them (serve-action.ts), each over a client of its own.
    const settings = loadConfig(
      {},
      {
        SESSIOND_WEBHOOKS: worker(receiver.port).extraEnv?.SESSIOND_WEBHOOKS ?? '',
        SESSIOND_WEBHOOK_DELIVERY: worker(receiver.port).extraEnv?.SESSIOND_WEBHOOK_DELIVERY ?? '',
      },
    );
    const serves = [0, 1].map(() => {
      const client = createClient({ redis: redisUrl, prefix: h.prefix });
      const delivery = startWebhookDelivery(
        client,
        { webhooks: settings.webhooks, delivery: settings.webhookDelivery },
        () => undefined,
      );
      return { client, delivery };
    });
    closeServes = async () => {
      for (const s of serves) {
        await s.delivery?.close();
        await s.client.close();
      }
    };
    const ids: string[] = [];
    for (let i = 0; i < 4; i += 1)
      ids.push(
        (await h.runtime.enqueue({ prompt: `hello ${i}`, options: { provider: 'fake', model: MODEL, cwd: env.cwd } }))
          .sessionId,
      );
    for (const id of ids) expect((await turnEnded(h.runtime, id)).state).toBe('completed');
    await until(async () => receiver.requests.length >= 4, 30_000, 'deliveries answered 503');
    await receiver.close();
    // Refused connections for a while (retried meanwhile), then the receiver is back.
    await until(
      async () => {
        for (const id of ids) {
          const states = await redis.hvals(outboxKey(internals(h.runtime).keys, id, 'state'));
          if (states.some((s) => s.includes('ECONNREFUSED'))) return true;
        }
        return false;
      },
      30_000,
      'a delivery refused',
    );
    receiver.status = 200;
    await receiver.listen();
    const expected = ids.flatMap((id) => [`${id}/1/turn.started`, `${id}/1/turn.ended`]).sort();
    await until(
      async () => [...receiver.delivered().values()].length >= expected.length,
      60_000,
      'every event delivered',
    );
    const delivered = [...receiver.delivered().values()];
    expect(delivered.map((e) => `${e.sessionId}/${e.turn}/${e.type}`).sort()).toEqual(expected);
    for (const r of receiver.requests) expect(validSignatures(r, SECRETS)).toBe(2);
    // webhook-id is stable across retries: every request of one id carried the same body.
    const bodies = new Map<string, Set<string>>();
    for (const r of receiver.requests) bodies.set(r.id, (bodies.get(r.id) ?? new Set()).add(r.body));
    expect([...bodies.values()].every((b) => b.size === 1)).toBe(true);
    expect(receiver.requests.some((r) => r.status === 503)).toBe(true);
    expect(receiver.maxInFlight).toBe(1);
    // Answered 2xx once per id: no deliverer sent an event another had delivered.
    const accepted = new Map<string, number>();
    for (const r of receiver.requests) if (r.status === 200) accepted.set(r.id, (accepted.get(r.id) ?? 0) + 1);
    expect([...accepted.values()].filter((n) => n > 1)).toEqual([]);
    // Counted in the fleet totals that serve's metrics report.
    // A deliverer counts a request once it has read the answer, after the receiver recorded it: waited for.
    const totals = await until(
      async () => {
        const t = await counterTotals(redis, internals(h.runtime).keys);
        return (t.get('webhooks|delivered') ?? 0) >= expected.length ? t : null;
      },
      30_000,
      'the deliveries counted',
    );
    expect(totals.get('webhooks|failed')).toBeGreaterThanOrEqual(1);
    for (const e of delivered.filter((d) => d.type === 'turn.ended')) {
      expect(e).toMatchObject({ status: 'completed', failureReason: null, seq: await lastSeq(e.sessionId) });
      expect(Object.keys(e)).toEqual(expect.arrayContaining(['type', 'id', 'sessionId', 'turn', 'at']));
    }
    // Delivered entries leave the outbox.
    await until(
      async () => {
        for (const id of ids)
          if ((await redis.zcard(outboxKey(internals(h.runtime).keys, id, 'due'))) > 0) return false;
        return true;
      },
      30_000,
      'the outboxes empty',
    );
    await receiver.close();
  }, 180_000);

  it('a worker kill -9ed right after a turn ended: its turn.ended is still delivered, by another worker', async () => {
    const port = await freePort();
    const first = await startWorkerProcess(worker(port));
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'hello',
      options: { provider: 'fake', model: MODEL, cwd: env.cwd },
    });
    expect((await turnEnded(h.runtime, sessionId)).state).toBe('completed');
    first.kill('SIGKILL');
    await first.exited;
    const receiver = new WebhookReceiver(port, 30);
    await receiver.listen();
    await startWorkerProcess(worker(port));
    await until(
      async () => [...receiver.delivered().values()].some((e) => e.sessionId === sessionId && e.type === 'turn.ended'),
      60_000,
      'turn.ended delivered',
    );
    const ended = [...receiver.delivered().values()].find((e) => e.sessionId === sessionId && e.type === 'turn.ended');
    expect(ended).toMatchObject({ turn: 1, status: 'completed', seq: await lastSeq(sessionId) });
    await receiver.close();
  }, 180_000);

  it("a deleted session's session.deleted is recorded with the removal and delivered once the session is gone", async () => {
    const receiver = new WebhookReceiver(await freePort(), 30);
    await receiver.listen();
    await startWorkerProcess(worker(receiver.port));
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'hello',
      options: { provider: 'fake', model: MODEL, cwd: env.cwd },
    });
    expect((await turnEnded(h.runtime, sessionId)).state).toBe('completed');
    await until(async () => (await h.runtime.getSession(sessionId))?.heldBy == null, 30_000, 'the worker lets go');
    expect(await h.runtime.deleteSession(sessionId, { actor: 'app:test' })).toMatchObject({ deleted: true });
    const deleted = await until(
      async () =>
        [...receiver.delivered().values()].find((e) => e.sessionId === sessionId && e.type === 'session.deleted'),
      30_000,
      'session.deleted delivered',
    );
    expect(deleted).toMatchObject({ turn: 1, reason: 'deleted', force: false, actor: 'app:test' });
    expect(await h.runtime.getSession(sessionId)).toBeNull();
    // Deleting again finds nothing to remove: no second event.
    expect(await h.runtime.deleteSession(sessionId)).toMatchObject({ deleted: false });
    await until(
      async () => (await redis.zcard(outboxKey(internals(h.runtime).keys, sessionId, 'due'))) === 0,
      30_000,
      'the outbox empty',
    );
    expect(receiver.requests.filter((r) => r.body.includes('"session.deleted"'))).toHaveLength(1);
    for (const r of receiver.requests) expect(validSignatures(r, SECRETS)).toBe(2);
    await receiver.close();
  }, 180_000);

  it('a loopback URL the operator did not list is refused: nothing is sent, the refusal is kept as the last error', async () => {
    const receiver = new WebhookReceiver(await freePort(), 30);
    await receiver.listen();
    await startWorkerProcess(worker(receiver.port, { allowAddresses: [] }));
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'hello',
      options: { provider: 'fake', model: MODEL, cwd: env.cwd },
    });
    expect((await turnEnded(h.runtime, sessionId)).state).toBe('completed');
    const key = outboxKey(internals(h.runtime).keys, sessionId, 'state');
    await until(
      async () => (await redis.hvals(key)).some((s) => s.includes('loopback, link-local or private')),
      30_000,
      'the refusal recorded',
    );
    expect(receiver.requests).toEqual([]);
    expect((await counterTotals(redis, internals(h.runtime).keys)).get('webhooks|refused')).toBeGreaterThanOrEqual(1);
    expect(await redis.zscore(webhookFleetKeys(internals(h.runtime).keys).markers, sessionId)).not.toBeNull();
    // Its events are dropped here: the next tests' workers, which allow loopback, would deliver or dead-letter them.
    await killAllWorkerProcesses();
    const keys = internals(h.runtime).keys;
    await redis.del(...(['outbox', 'due', 'state', 'claim'] as const).map((part) => outboxKey(keys, sessionId, part)));
    await redis.zrem(webhookFleetKeys(keys).markers, sessionId);
    await receiver.close();
  }, 180_000);

  it('events not delivered within maxAgeMs become dead letters; a replay from their number delivers them, same webhook-id', async () => {
    const port = await freePort();
    await startWorkerProcess(worker(port, { maxAgeMs: 1000 }));
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'hello',
      options: { provider: 'fake', model: MODEL, cwd: env.cwd },
    });
    expect((await turnEnded(h.runtime, sessionId)).state).toBe('completed');
    const keys = internals(h.runtime).keys;
    const dead = await until(
      async () => {
        const letters = (await deadLetters(redis, keys)).filter((d) => d.sessionId === sessionId);
        return letters.length === 2 ? letters : null;
      },
      30_000,
      'two dead letters',
    );
    expect(dead.map((d) => d.type).sort()).toEqual(['turn.ended', 'turn.started']);
    expect(dead.every((d) => d.lastError.includes('ECONNREFUSED'))).toBe(true);
    const receiver = new WebhookReceiver(port, 30);
    await receiver.listen();
    const from = Math.min(...dead.map((d) => d.seq));
    expect(await replayDeadLetters(redis, keys, { seq: from })).toBe(2);
    expect((await deadLetters(redis, keys)).filter((d) => d.sessionId === sessionId)).toEqual([]);
    await until(async () => receiver.delivered().size === 2, 30_000, 'the replayed events delivered');
    expect([...receiver.delivered().keys()].sort()).toEqual(dead.map((d) => d.id).sort());
    for (const r of receiver.requests) expect(validSignatures(r, SECRETS)).toBe(2);
    expect((await counterTotals(redis, keys)).get('webhooks|dead')).toBeGreaterThanOrEqual(2);
    await receiver.close();
  }, 180_000);
});
