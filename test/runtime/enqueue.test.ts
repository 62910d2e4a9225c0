import { describe, expect, it } from 'vitest';
import type { PiEnv } from '../support/pi-env.ts';
import type { Redis } from 'ioredis';
import { Runtime } from '../../src/runtime/runtime.ts';
import {
  assistantText,
  BACKENDS,
  expectWholeLog,
  TEST_POLICY,
  turnEnded,
  until,
  type Harness,
  useRuntimeSuite,
} from '../support/runtime.ts';

let env: PiEnv;
let h: Harness;

const ended = (sessionId: string, turn = 1) => turnEnded(h.runtime, sessionId, turn);

// On one Redis and on a real 3-master Redis Cluster (every script and read of a session in its own slot).
describe.each(BACKENDS)('durable sessions: enqueue through a real worker, on %s Redis', (backend) => {
  useRuntimeSuite(`enqueue-${backend}`, { backend }, async (s) => {
    ({ env, h } = s);
    await h.startWorker();
  });

  it('enqueue → the worker runs real pi → completed, with every message in the log', async () => {
    const { sessionId, turn } = await h.runtime.enqueue({
      prompt: 'Say hello',
      options: { provider: 'fake', model: 'text', cwd: env.cwd },
    });
    expect(turn).toBe(1);
    const session = await ended(sessionId);
    expect(session.state).toBe('completed');
    const messages = await h.runtime.readMessages(sessionId);
    expectWholeLog(messages);
    expect(messages[0]).toMatchObject({ seq: 1, turn: 1, attempt: 1, type: 'session.started' });
    expect(messages.at(-1)).toMatchObject({ type: 'terminal.completed' });
    expect(assistantText(messages)).toBe('Hello from the fake LLM.');
    expect(session.history.map((t) => t.to)).toEqual(expect.arrayContaining(['running', 'completed']));
    expect(await h.runtime.listSessions({ state: 'completed' })).toContainEqual({ sessionId, state: 'completed' });
  });

  // On the cluster only the scenarios that touch its routing run again (the rest is the same code).
  if (backend === 'single') {
    it("close() ends every Redis connection the runtime made, the activation queue's included", async () => {
      const made: Array<{ role: string; redis: Redis }> = [];
      const runtime = new Runtime({
        connect: (role) => {
          const redis = h.connect(role);
          made.push({ role, redis });
          return redis;
        },
        prefix: h.prefix,
        policy: TEST_POLICY,
      });
      const { sessionId } = await runtime.enqueue({
        prompt: 'Say hello',
        options: { provider: 'fake', model: 'text', cwd: env.cwd },
      });
      await ended(sessionId);
      await runtime.close();
      expect(made.map((m) => m.role)).toEqual(expect.arrayContaining(['runtime', 'runtime-queue']));
      // Each one closed: nothing of it keeps an embedder's process from exiting.
      await until(async () => made.every((m) => m.redis.status === 'end'), 5_000, 'every connection to end');
      expect(made.filter((m) => m.redis.status !== 'end').map((m) => `${m.role}: ${m.redis.status}`)).toEqual([]);
    });

    it('the longest session id the API accepts (100 characters) runs its turn; . and .. are refused', async () => {
      const sessionId = `${'a'.repeat(60)}.${'b'.repeat(39)}`;
      expect(sessionId).toHaveLength(100);
      await h.runtime.enqueue({
        sessionId,
        prompt: 'Say hello',
        options: { provider: 'fake', model: 'text', cwd: env.cwd },
      });
      expect((await ended(sessionId)).state).toBe('completed');
      for (const bad of ['.', '..'])
        await expect(h.runtime.enqueue({ sessionId: bad, prompt: 'hi' })).rejects.toThrow(
          /sessionId: must be 1-100 letters, digits or _.-, and not . or ../,
        );
    });

    it('a second prompt to the same session runs as turn 2 in the same pi session', async () => {
      const { sessionId } = await h.runtime.enqueue({
        prompt: 'first',
        options: { provider: 'fake', model: 'text', cwd: env.cwd },
      });
      await ended(sessionId, 1);
      const second = await h.runtime.enqueue({ sessionId, prompt: 'second' });
      expect(second.turn).toBe(2);
      const session = await ended(sessionId, 2);
      expect(session.state).toBe('completed');
      const messages = await h.runtime.readMessages(sessionId);
      expect(messages.filter((m) => m.turn === 2)[0]?.type).toBe('session.resumed');
    });
  }

  it('prompts enqueued concurrently to one session are all kept and run in order', async () => {
    const sessionId = `concurrent-${Date.now()}`;
    const results = await Promise.all(
      Array.from({ length: 5 }, (_, i) =>
        h.runtime.enqueue({
          sessionId,
          prompt: `prompt ${i}`,
          options: { provider: 'fake', model: 'text-burst', cwd: env.cwd },
        }),
      ),
    );
    expect(results.map((r) => r.turn).sort()).toEqual([1, 2, 3, 4, 5]);
    const session = await turnEnded(h.runtime, sessionId, 5, 140_000);
    expect(session.context?.finishedPromptIds).toHaveLength(5);
  }, 150_000);
});
