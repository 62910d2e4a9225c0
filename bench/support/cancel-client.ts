import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { Runtime } from '../../src/runtime/runtime.ts';
import { internals } from '../../src/runtime/internals.ts';

/**
 * The "other process" of the queue benchmark's cancel runs:
 * `node --import tsx bench/support/cancel-client.ts <redis-url>`.
 * Reads one JSON request per stdin line, `{"prefix":…,"sessionId":…}`, calls
 * `Runtime.cancel` for it (requests are handled concurrently, as they come)
 * and prints one JSON line per request:
 * `{"sessionId":…,"calledAt":<Date.now() just before cancel()>,"returnedAt":…,"delivered":…}`
 * (or `{"sessionId":…,"error":…}`). Prints `{"ready":true}` once its
 * connections are up; exits when stdin ends.
 */

const url = process.argv[2];
if (url === undefined) {
  console.error('usage: cancel-client.ts <redis-url>');
  process.exit(2);
}

const connections: Redis[] = [];
const connect = (role: string): Redis => {
  const redis = new Redis(url, { maxRetriesPerRequest: null, connectionName: `bench-cancel:${role}` });
  redis.on('error', () => undefined);
  connections.push(redis);
  return redis;
};

const runtimes = new Map<string, Runtime>();
async function runtimeFor(prefix: string): Promise<Runtime> {
  let runtime = runtimes.get(prefix);
  if (runtime === undefined) {
    runtime = new Runtime({ connect, prefix });
    runtimes.set(prefix, runtime);
    await internals(runtime).redis.ping();
  }
  return runtime;
}

const write = (value: unknown): void => void process.stdout.write(`${JSON.stringify(value)}\n`);

async function handle(line: string): Promise<void> {
  let request: { prefix?: unknown; sessionId?: unknown; warm?: unknown };
  try {
    request = JSON.parse(line) as typeof request;
  } catch {
    write({ error: `not JSON: ${line.slice(0, 80)}` });
    return;
  }
  const { prefix, sessionId } = request;
  if (typeof prefix !== 'string' || typeof sessionId !== 'string') {
    write({ error: 'expected {"prefix":string,"sessionId":string}' });
    return;
  }
  try {
    const runtime = await runtimeFor(prefix);
    if (request.warm === true) {
      // Opens the connections (and loads the scripts) before any timed call.
      await runtime.cancel(sessionId).catch(() => undefined);
      write({ sessionId, warm: true });
      return;
    }
    const calledAt = Date.now();
    const { delivered } = await runtime.cancel(sessionId, 'bench: cancel from another process');
    write({ sessionId, calledAt, returnedAt: Date.now(), delivered });
  } catch (error) {
    write({ sessionId, error: (error as Error).message });
  }
}

const pending = new Set<Promise<void>>();
const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  if (line.trim() === '') return;
  const p = handle(line).finally(() => pending.delete(p));
  pending.add(p);
});
lines.on('close', () => {
  void Promise.all(pending).finally(async () => {
    for (const runtime of runtimes.values()) await runtime.close().catch(() => undefined);
    for (const redis of connections) redis.disconnect();
    process.exit(0);
  });
});
write({ ready: true });
