import { describe, expect, it } from 'vitest';
import { ConflictError } from '../../src/runtime/lifecycle/errors.ts';
import { NotFoundError } from '../../src/runtime/runtime.ts';
import type { SessionWorker } from '../../src/runtime/worker.ts';
import type { FakeModelServer } from '../support/fake-model-server.ts';
import type { PiEnv } from '../support/pi-env.ts';
import { turnEnded, until, type Harness, useRuntimeSuite } from '../support/runtime.ts';

/** Queued prompts: listed in the order their turns will run, and removed safely whoever holds the session. */

const TEXT = 'queued-text';
let server: FakeModelServer;
let env: PiEnv;
let h: Harness;
let worker: SessionWorker | null = null;

useRuntimeSuite('queued-prompts', { scripts: { [TEXT]: { text: 'ok', chunkDelayMs: 0 } } }, (s) => {
  ({ server, env, h } = s);
});

/** Every prompt text the model was sent as the last user message, in order. */
const promptsSeen = (): string[] =>
  server.requestsFor(TEXT).map((r) => {
    const users = (r.body.messages ?? []).filter((m) => m.role === 'user');
    return JSON.stringify(users.at(-1)?.content ?? '');
  });

/** The session once nothing runs, waits or is held. */
const settled = (sessionId: string) =>
  until(
    async () => {
      const v = await h.runtime.getSession(sessionId);
      return v !== null &&
        ['completed', 'failed', 'cancelled'].includes(v.state) &&
        v.heldBy === null &&
        v.queued.length === 0 &&
        (v.context?.mailbox.length ?? 0) === 0
        ? v
        : null;
    },
    90_000,
    `${sessionId} to settle`,
  );

describe('queued prompts', () => {
  it('a session nobody holds: lists its prompts in order, removes one, and only the others run', async () => {
    const opts = { provider: 'fake', model: TEXT, cwd: env.cwd };
    const { sessionId } = await h.runtime.enqueue({ prompt: 'prompt one', options: opts });
    await h.runtime.enqueue({ sessionId, prompt: 'prompt two' });
    await h.runtime.enqueue({ sessionId, prompt: 'prompt three' });
    const listed = await h.runtime.queuedPrompts(sessionId);
    expect(listed.map((p) => [p.position, p.text, p.where])).toEqual([
      [1, 'prompt one', 'inbox'],
      [2, 'prompt two', 'inbox'],
      [3, 'prompt three', 'inbox'],
    ]);

    expect(await h.runtime.removeQueuedPrompt(sessionId, listed[1]!.id)).toEqual({
      sessionId,
      promptId: listed[1]!.id,
      removed: true,
    });
    expect((await h.runtime.queuedPrompts(sessionId)).map((p) => p.text)).toEqual(['prompt one', 'prompt three']);
    await expect(h.runtime.removeQueuedPrompt(sessionId, listed[1]!.id)).rejects.toBeInstanceOf(NotFoundError);
    // The turn numbers of what follows stay true: the next prompt is turn 3, not 4.
    expect((await h.runtime.enqueue({ sessionId, prompt: 'prompt four' })).turn).toBe(3);

    worker ??= await h.startWorker();
    const done = await settled(sessionId);
    expect(done.context?.turnIndex).toBe(3);
    expect(
      promptsSeen()
        .filter((t) => /prompt (one|two|three|four)/.test(t))
        .map((t) => /prompt (\w+)/.exec(t)?.[1]),
    ).toEqual(['one', 'three', 'four']);
  });

  it('while a worker runs a turn: a prompt in its mailbox is removed and never runs; the running turn’s own prompt is refused', async () => {
    worker ??= await h.startWorker();
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Sleep a long time',
      options: { provider: 'fake', model: 'long-tool', cwd: env.cwd },
    });
    await until(
      async () => (await h.runtime.readMessages(sessionId)).some((m) => m.type === 'tool.call'),
      60_000,
      'the long tool',
    );
    await h.runtime.enqueue({ sessionId, prompt: 'prompt five', options: { model: TEXT } });
    await h.runtime.enqueue({ sessionId, prompt: 'prompt six', options: { model: TEXT } });
    // The holder reads them into its mailbox (pub/sub).
    const queued = await until(
      async () => {
        const list = await h.runtime.queuedPrompts(sessionId);
        return list.length === 2 && list.every((p) => p.where === 'mailbox') ? list : null;
      },
      30_000,
      'the prompts in the mailbox',
    );
    expect(queued.map((p) => p.text)).toEqual(['prompt five', 'prompt six']);
    expect(await h.runtime.removeQueuedPrompt(sessionId, queued[0]!.id)).toMatchObject({ removed: true });
    expect((await h.runtime.queuedPrompts(sessionId)).map((p) => p.text)).toEqual(['prompt six']);
    const running = (await h.runtime.getSession(sessionId))!.context!.turn!.promptId;
    await expect(h.runtime.removeQueuedPrompt(sessionId, running)).rejects.toBeInstanceOf(ConflictError);

    await h.runtime.cancel(sessionId, 'enough sleeping');
    await turnEnded(h.runtime, sessionId, 2, 90_000);
    const done = await settled(sessionId);
    expect(done.context?.turnIndex).toBe(2);
    const seen = promptsSeen();
    expect(seen.some((t) => t.includes('prompt six'))).toBe(true);
    expect(seen.some((t) => t.includes('prompt five'))).toBe(false);
  });

  it('a removal racing the worker taking the prompt: removed means it never runs, refused means it ran', async () => {
    worker ??= await h.startWorker();
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'prompt warm-up',
      options: { provider: 'fake', model: TEXT, cwd: env.cwd },
    });
    await settled(sessionId);
    const outcomes: Array<{ text: string; removed: boolean }> = [];
    for (let i = 0; i < 4; i++) {
      const text = `race prompt ${i}`;
      await h.runtime.enqueue({ sessionId, prompt: text });
      const id = await until(
        async () =>
          (await h.runtime.getSession(sessionId))?.queued.find((p) => p.text === text)?.id ??
          (await h.runtime.getSession(sessionId))?.context?.mailbox.find((p) => p.text === text)?.id ??
          (await h.runtime.getSession(sessionId))?.context?.turn?.promptId,
        10_000,
        'the prompt id',
      );
      const removed = await h.runtime.removeQueuedPrompt(sessionId, id).then(
        () => true,
        (error: Error) => {
          if (!(error instanceof ConflictError)) throw error;
          return false;
        },
      );
      outcomes.push({ text, removed });
      await settled(sessionId);
    }
    const seen = promptsSeen();
    for (const o of outcomes)
      expect(
        seen.some((t) => t.includes(o.text)),
        `${o.text} removed=${o.removed}`,
      ).toBe(!o.removed);
    const done = await settled(sessionId);
    expect(done.context?.turnIndex).toBe(1 + outcomes.filter((o) => !o.removed).length);
  });
});
