import fc from 'fast-check';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { createApp } from '../../src/interfaces/http/app.ts';
import { Runtime } from '../../src/runtime/runtime.ts';
import { startRedis, uniquePrefix, type RedisServer } from '../support/redis.ts';
import { connector } from '../support/runtime.ts';
import { internals } from '../../src/runtime/internals.ts';
import { clientOver } from '../../src/api/bind.ts';

let redis: RedisServer;
let runtime: Runtime;
let app: ReturnType<typeof createApp>;
let closeAll: () => void;
let prefix: string;

beforeAll(async () => {
  redis = await startRedis();
  const c = connector(redis.url);
  closeAll = c.closeAll;
  prefix = uniquePrefix('fuzz-http');
  runtime = new Runtime({ connect: c.connect, prefix });
  // BullMQ writes its queue's meta key once, when the queue first connects: before any request.
  await internals(runtime).queue.queue.waitUntilReady();
  await internals(runtime).queue.queue.getJobCounts();
  app = createApp({
    client: clientOver(runtime),
    config: loadConfig({ prefix, 'http.bodyLimitBytes': 8192 }, {}),
    logger: pino({ level: 'silent' }),
  });
});

afterAll(async () => {
  await runtime.close();
  closeAll();
  await redis.stop();
});

const field = fc.constantFrom(
  'prompt',
  'sessionId',
  'options',
  'retryPolicy',
  'agent',
  'model',
  'maxAttempts',
  'initialDelayMs',
  'jitter',
  'retryOn',
  'enabled',
  'command',
  'env',
  'cwd',
  '__proto__',
);
const value = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.string({ maxLength: 5 }), { maxLength: 3 }),
  fc.dictionary(field, fc.oneof(fc.string({ maxLength: 8 }), fc.integer(), fc.boolean()), { maxKeys: 3 }),
);
const body = fc.oneof(
  fc.dictionary(field, value, { maxKeys: 5 }),
  fc.jsonValue(),
  fc.string({ maxLength: 30 }).map((s) => ({ __raw: s })),
);

/** The keys of the prefix (sessions, indexes, queue) and the global policy's value: what a refused request must leave as it was. */
async function written(): Promise<{ keys: string[]; policy: string | null }> {
  return {
    keys: (await internals(runtime).redis.keys(`*${prefix}*`)).sort(),
    policy: await internals(runtime).redis.get(internals(runtime).keys.policy),
  };
}

function send(method: string, path: string, payload: unknown) {
  const raw =
    payload !== null && typeof payload === 'object' && '__raw' in payload
      ? String((payload as { __raw: string }).__raw)
      : JSON.stringify(payload);
  return app.request(`http://127.0.0.1${path}`, {
    method,
    headers: { 'content-type': 'application/json', host: '127.0.0.1' },
    body: raw,
  });
}

describe('HTTP request bodies, fuzzed', () => {
  it('any body to a mutating endpoint is accepted or refused with a 4xx naming the field — never a 5xx — and a refusal writes nothing', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(['POST', '/api/sessions'], ['PUT', '/api/retry-policy']),
        body,
        async ([method, path], payload) => {
          const before = await written();
          const response = await send(method, path, payload);
          expect(response.status, JSON.stringify(payload)).toBeLessThan(500);
          if (response.status >= 400) {
            const json = (await response.json()) as {
              error?: string;
              issues?: Array<{ field: string; message: string }>;
            };
            expect(typeof json.error).toBe('string');
            if (response.status === 400 && json.issues !== undefined)
              for (const issue of json.issues) expect(issue.field.length).toBeGreaterThan(0);
            expect(await written()).toEqual(before);
          }
        },
      ),
      { numRuns: 150 },
    );
  });
});
