import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, createReader, type Client, type Reader } from '../../src/index.ts';
import { startRedis, uniquePrefix, type RedisServer } from '../support/redis.ts';

/** One rule for an unknown session: every operation of the client and the reader that names one throws `not_found`. */

let redis: RedisServer;
let client: Client;
let reader: Reader;

beforeAll(async () => {
  redis = await startRedis();
  const prefix = uniquePrefix('notfound');
  client = createClient({ redis: redis.url, prefix });
  reader = createReader({ redis: redis.url, prefix });
});

afterAll(async () => {
  await client?.close();
  await reader?.close();
  await redis?.stop();
});

const ID = 'no-such-session';

/** Every operation on one session, by name: the client's handle and nouns, and the reader's. */
function operations(): Record<string, () => Promise<unknown>> {
  const session = client.session(ID);
  const read = reader.session(ID);
  const first = async (iterable: AsyncIterable<unknown>) => {
    for await (const item of iterable) return item;
    return undefined;
  };
  return {
    'session.inspect': () => session.inspect(),
    'session.messages': () => session.messages(),
    'session.lastSeq': () => session.lastSeq(),
    'session.watch': () => first(session.watch()),
    'session.watch follow': () => first(session.watch({ follow: true, signal: AbortSignal.timeout(5_000) })),
    'session.watch shared': () => first(session.watch({ shared: true, signal: AbortSignal.timeout(5_000) })),
    'session.prompt': () => session.prompt({ prompt: 'hello' }),
    'session.cancel': () => session.cancel('why'),
    'session.retry': () => session.retry(),
    'session.resume': () => session.resume(),
    'session.delete': () => session.delete(),
    'session.delete force': () => session.delete({ force: true }),
    'session.export': () => session.export(),
    'session.undo': () => session.undo(),
    'session.fork': () => session.fork({ as: 'a-copy' }),
    'session.diff': () => session.diff(),
    'prompts.list': () => client.prompts.list(ID),
    'prompts.remove': () => client.prompts.remove(ID, 'p1'),
    'approvals.decide': () => client.approvals.decide(ID, 't1-0123456789ab-1', { verdict: 'allow', by: 'test' }),
    'retryPolicy.get': () => client.retryPolicy.get({ sessionId: ID }),
    'retryPolicy.set': () => client.retryPolicy.set({ maxAttempts: 2 }, { sessionId: ID }),
    'retryPolicy.reset': () => client.retryPolicy.reset({ sessionId: ID }),
    'reader.inspect': () => read.inspect(),
    'reader.messages': () => read.messages(),
    'reader.lastSeq': () => read.lastSeq(),
    'reader.watch': () => first(read.watch()),
  };
}

describe('an unknown session', () => {
  it('is a NotFoundError (code not_found) from every operation, and nothing is written', async () => {
    const outcomes: Record<string, string> = {};
    for (const [name, run] of Object.entries(operations())) {
      outcomes[name] = await run().then(
        (value) => `resolved ${JSON.stringify(value)}`,
        (error: unknown) =>
          `${(error as Error).name} ${(error as { code?: string }).code}: ${(error as Error).message}`,
      );
    }
    const expected = Object.fromEntries(
      Object.keys(outcomes).map((name) => [name, `NotFoundError not_found: unknown session "${ID}"`]),
    );
    expect(outcomes).toEqual(expected);
    // Nothing was made by asking.
    expect((await client.sessions.list()).sessions).toEqual([]);
    await expect(client.session('a-copy').inspect()).rejects.toMatchObject({ code: 'not_found' });
  });

  it('a malformed id is an InputError naming sessionId, from the reads as from the rest', async () => {
    for (const run of [
      () => client.session('no such id').inspect(),
      () => reader.session('no such id').lastSeq(),
      () => client.session('no such id').cancel(),
    ]) {
      const error = await run().catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'invalid_input', issues: [expect.objectContaining({ field: 'sessionId' })] });
    }
  });
});
