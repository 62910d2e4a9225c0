import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKeys } from '../../src/runtime/keys.ts';
import { createRedis } from '../../src/runtime/redis/index.ts';
import { SessionWriter } from '../../src/runtime/session-writer.ts';
import { SessionStore, type WriteBatch, type WriteResult } from '../../src/runtime/store/session-store.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';
import type { Redis } from 'ioredis';

/**
 * The messages of one fenced write (see WRITE): whatever a message holds, it is read back as it
 * was written, one log entry per message, in order.
 */

let server: RedisServer;
let redis: Redis;
let store: SessionStore;

beforeAll(async () => {
  server = await startRedis();
  redis = createRedis(server.url, { role: 'message-log-test', maxRetriesPerRequest: null, log: () => undefined });
  store = new SessionStore(redis, createKeys('msglog'));
});

afterAll(async () => {
  redis?.disconnect();
  await server?.stop();
});

async function held(sessionId: string, prompts = 1): Promise<string> {
  for (let i = 1; i <= prompts; i += 1) {
    await store.enqueue(
      sessionId,
      { agent: 'pi', options: '{}' },
      { id: `p${i}`, text: `prompt ${i}`, options: {}, enqueuedAt: Date.now() },
      null,
      `${sessionId}.job`,
    );
  }
  const lease = await store.acquire(sessionId, 'test-worker', 30_000);
  if (!lease.ok) throw new Error(`no lease: ${lease.reason}`);
  return lease.token;
}

describe('the message log: messages written in one batch', () => {
  it('multi-byte text, newlines, separators and digits in contents and types are read back unchanged, with seq, turn and attempt', async () => {
    const token = await held('unicode');
    const contents = [
      { text: 'héllo wörld — ✓ 日本語 🎉' },
      { text: 'line one\nline two\r\n3 4 5 6\n' },
      { text: '' },
      { text: '12 1 9 40\nassistant{"text":"not a header"}' },
      { tool: 'bash', args: { command: 'printf "%s\\n" "$HOME"' } },
    ];
    const messages = contents.map((content, i) => ({
      turn: 3,
      attempt: i < 2 ? 1 : 2,
      type: i === 4 ? 'tool call with spaces\n' : 'assistant',
      content: JSON.stringify(content),
    }));
    const { lastSeq } = await store.write('unicode', token, { messages });
    expect(lastSeq).toBe(contents.length);
    const read = await store.readMessages('unicode', 1, 100);
    expect(read).toEqual(
      messages.map((m, i) => ({ seq: i + 1, turn: 3, attempt: m.attempt, type: m.type, content: contents[i] })),
    );
  });

  it('a large batch (a thousand messages of 2 KB) lands whole and in order', async () => {
    const token = await held('large');
    const messages = Array.from({ length: 1000 }, (_, i) => ({
      turn: 1,
      attempt: 1,
      type: 'assistant',
      content: JSON.stringify({ text: `${i}:${'ü'.repeat(1000)}` }),
    }));
    await store.write('large', token, { messages });
    const read = await store.readMessages('large', 1, 2000);
    expect(read).toHaveLength(1000);
    expect(
      read.every((m, i) => m.seq === i + 1 && (m.content as { text: string }).text === `${i}:${'ü'.repeat(1000)}`),
    ).toBe(true);
  });
});

describe('the message log: a batch sent again after it landed', () => {
  const message = (text: string) => ({ turn: 1, attempt: 1, type: 'assistant', content: JSON.stringify({ text }) });

  it('the same batch number writes nothing the second time: no message twice, no second inbox trim, no history twice', async () => {
    const token = await held('again', 3);
    const batch: WriteBatch = {
      writeId: 1,
      inboxTrim: 1,
      history: ['{"to":"running"}'],
      messages: [message('a'), message('b')],
    };
    await store.write('again', token, batch);
    await store.write('again', token, batch);
    // A batch without messages (a snapshot and an inbox trim: the write before an agent starts) too.
    const trimOnly: WriteBatch = { writeId: 2, inboxTrim: 1, snapshot: '{"s":1}', state: 'running' };
    await store.write('again', token, trimOnly);
    await store.write('again', token, trimOnly);
    expect((await store.readMessages('again')).map((m) => [m.seq, (m.content as { text: string }).text])).toEqual([
      [1, 'a'],
      [2, 'b'],
    ]);
    expect((await store.inbox('again')).map((p) => p.id)).toEqual(['p3']);
    expect(await store.history('again')).toEqual([{ to: 'running' }]);
  });

  it('a writer whose call landed but failed to answer sends that batch again alone: every message once, in order', async () => {
    const token = await held('lost-reply');
    /** The first write lands in Redis, then its caller sees an error (a connection lost before the reply). */
    class LostReplyStore extends SessionStore {
      #calls = 0;
      override async write(sessionId: string, t: string, batch: WriteBatch): Promise<WriteResult> {
        const result = await super.write(sessionId, t, batch);
        this.#calls += 1;
        if (this.#calls === 1) throw new Error('Connection is closed.');
        return result;
      }
    }
    const writer = new SessionWriter(new LostReplyStore(redis, createKeys('msglog')), 'lost-reply', token);
    // Below the batch size: each message only waits for the flush awaited next (message() gives undefined).
    void writer.message(1, 1, 'assistant', { text: 'one' });
    void writer.message(1, 1, 'assistant', { text: 'two' });
    await expect(writer.flush()).rejects.toThrow('Connection is closed.');
    void writer.message(1, 1, 'assistant', { text: 'three' });
    await writer.flush();
    expect((await store.readMessages('lost-reply')).map((m) => [m.seq, (m.content as { text: string }).text])).toEqual([
      [1, 'one'],
      [2, 'two'],
      [3, 'three'],
    ]);
  });
});
