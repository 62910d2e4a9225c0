import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  createClient,
  createWorker,
  defineAgent,
  type NoLiveWorkerNotice,
  type StoredMessage,
} from '../../src/index.ts';
import { startRedis, uniquePrefix, type RedisServer } from '../support/redis.ts';

/** The library's watch says when no live worker can take the session, once, and keeps waiting (the CLI's rule). */

const hello = defineAgent({
  name: 'hello',
  options: z.object({}),
  async *run({ prompt }) {
    yield { type: 'assistant', content: { text: `hello, ${prompt}` } };
    yield { type: 'terminal.completed', content: { stopReason: 'end' } };
  },
});

let redis: RedisServer;

beforeAll(async () => {
  redis = await startRedis();
});

afterAll(async () => {
  await redis?.stop();
});

describe('watch with onNoLiveWorker', () => {
  it.each([false, true])(
    'follow %s: told once that no worker has ever sent a heartbeat; the turn completes once a worker starts',
    async (follow) => {
      const prefix = uniquePrefix('no-worker');
      const client = createClient({ redis: redis.url, prefix, agents: [hello] });
      // Workspaces off: not what this tests, and the default would write under the host's state dir.
      // Workspaces off, as above.
      const worker = createWorker({ redis: redis.url, prefix, agents: [hello], workspaces: false });
      const controller = new AbortController();
      try {
        const { sessionId } = await client.sessions.enqueue({ prompt: 'you', options: { agent: 'hello' } });
        const notices: NoLiveWorkerNotice[] = [];
        const seen: StoredMessage[] = [];
        for await (const message of client.session(sessionId).watch({
          follow,
          signal: controller.signal,
          onNoLiveWorker: (notice) => {
            notices.push(notice);
            // Told while waiting: a worker starts, and the watch goes on to the turn's end.
            void worker.start();
          },
        })) {
          seen.push(message);
          if (message.type === 'terminal.completed') controller.abort();
        }
        expect(seen.map((m) => m.type)).toEqual(['assistant', 'terminal.completed']);
        expect(notices).toEqual([
          {
            kind: 'no_live_worker',
            sessionId,
            turn: 1,
            agent: 'hello',
            workersSeen: 0,
            workersLive: 0,
            agentsOffered: [],
            staleMs: 15_000,
            at: expect.any(Number),
          },
        ]);
      } finally {
        await client.close();
        await worker.close();
      }
    },
  );

  it('says nothing while a live worker is there', async () => {
    const prefix = uniquePrefix('live-worker');
    const client = createClient({ redis: redis.url, prefix, agents: [hello] });
    // Workspaces off, as above.
    const worker = createWorker({ redis: redis.url, prefix, agents: [hello], workspaces: false });
    await worker.start();
    try {
      const { sessionId } = await client.sessions.enqueue({ prompt: 'there', options: { agent: 'hello' } });
      const notices: NoLiveWorkerNotice[] = [];
      const types: string[] = [];
      for await (const message of client.session(sessionId).watch({ onNoLiveWorker: (n) => notices.push(n) }))
        types.push(message.type);
      expect(types).toEqual(['assistant', 'terminal.completed']);
      expect(notices).toEqual([]);
    } finally {
      await client.close();
      await worker.close();
    }
  });
});
