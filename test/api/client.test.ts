import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  createClient,
  createReader,
  createWorker,
  defineAgent,
  hasErrorCode,
  type Client,
  type StoredMessage,
  type Worker,
  type WorkerEvents,
} from '../../src/index.ts';
import { startRedis, uniquePrefix, type RedisServer } from '../support/redis.ts';
import { collect } from '../support/processes.ts';

/** The public API through the entry point: a worker with an agent defined here, a client, a real redis-server. */

// Fails its first attempt of every turn as a server error (retried), then answers; `hold` waits for the signal.
const attempts = new Map<string, number>();
const flaky = defineAgent({
  name: 'flaky',
  options: z.object({ hold: z.boolean().optional() }),
  async *run({ prompt, options, signal }) {
    const n = (attempts.get(prompt) ?? 0) + 1;
    attempts.set(prompt, n);
    if (n === 1) {
      yield {
        type: 'terminal.failed',
        content: { text: 'HTTP 503', category: 'server_error', stderr: '', invalid_output_lines: [] },
      };
      return;
    }
    yield { type: 'assistant', content: { text: `answer to ${prompt}` } };
    if (options.hold === true)
      await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
    yield { type: 'terminal.completed', content: { stopReason: 'end' } };
  },
});

// Starts a tool call and never reports its result: then fails (`fail`), or waits for the stop and answers late.
const tooling = defineAgent({
  name: 'tooling',
  options: z.object({ fail: z.boolean().optional(), lie: z.boolean().optional() }),
  async *run({ options, signal }) {
    yield { type: 'tool.call', content: { toolCallId: 't1', name: 'bash', arguments: { command: 'sleep 100' } } };
    if (options.lie === true) {
      yield { type: 'terminal.cancelled', content: { reason: 'not mine to say' } };
      return;
    }
    if (options.fail === true) {
      yield {
        type: 'terminal.failed',
        content: { text: 'bad', category: 'bad_request', stderr: '', invalid_output_lines: [] },
      };
      return;
    }
    await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
    yield { type: 'terminal.completed', content: { stopReason: 'end' } };
  },
});

let redis: RedisServer;
let prefix: string;
let client: Client;
let worker: Worker;
const events: Array<{ kind: keyof WorkerEvents; payload: unknown }> = [];
/** What `inspect` said from inside each turnEnded listener: the state stored when the worker told of the end. */
const statesWhenTold = new Map<string, Promise<string | undefined>>();

beforeAll(async () => {
  redis = await startRedis();
  prefix = uniquePrefix('api');
  // Workspaces off: not what this suite tests, and the default would write under the host's state dir.
  worker = createWorker({ redis: redis.url, prefix, agents: [flaky, tooling], concurrency: 2, workspaces: false });
  worker.on('turnEnded', (payload) => {
    events.push({ kind: 'turnEnded', payload });
    statesWhenTold.set(
      `${payload.sessionId}/${payload.turn}`,
      client
        .session(payload.sessionId)
        .inspect()
        .then((view) => view?.state),
    );
  });
  worker.on('attemptFailed', (payload) => events.push({ kind: 'attemptFailed', payload }));
  await worker.start();
  client = createClient({ redis: redis.url, prefix, agents: [flaky, tooling] });
  await client.retryPolicy.set({ initialDelayMs: 10, maxDelayMs: 20, jitter: 'none' });
});

afterAll(async () => {
  await client?.close();
  await worker?.close();
  await redis?.stop();
});

describe('createClient / createWorker / defineAgent', () => {
  it("runs a custom agent's turn through the retry: watch streams every message once, in order, and ends with the turn; the worker tells of the failed attempt and the turn's end", async () => {
    const { sessionId, created } = await client.sessions.enqueue({ prompt: 'one', options: { agent: 'flaky' } });
    expect(created).toBe(true);
    const messages = await collect(client.session(sessionId).watch());
    expect(messages.map((m) => `${m.seq} ${m.turn}/${m.attempt} ${m.type}`)).toEqual([
      '1 1/1 terminal.failed',
      '2 1/2 assistant',
      '3 1/2 terminal.completed',
    ]);
    expect((await client.session(sessionId).inspect())?.state).toBe('completed');
    expect(events).toContainEqual({
      kind: 'attemptFailed',
      payload: { sessionId, turn: 1, attempt: 1, category: 'server_error', text: 'HTTP 503' },
    });
    expect(events).toContainEqual({
      kind: 'turnEnded',
      payload: { sessionId, turn: 1, status: 'completed', failureReason: null, cancelReason: null },
    });
    // Resumed from a seq: only what follows it.
    expect((await collect(client.session(sessionId).watch({ from: 3 }))).map((m) => m.seq)).toEqual([3]);
  });

  it('watch with follow ends when its signal aborts; cancel ends a held turn cancelled, and the worker says so', async () => {
    const { sessionId } = await client.sessions.enqueue({ prompt: 'two', options: { agent: 'flaky', hold: true } });
    const controller = new AbortController();
    const off = worker.on('turnEnded', (turn) => {
      if (turn.sessionId === sessionId) controller.abort();
    });
    const seen: StoredMessage[] = [];
    for await (const message of client.session(sessionId).watch({ follow: true, signal: controller.signal })) {
      seen.push(message);
      if (message.type === 'assistant') await client.session(sessionId).cancel('from the test');
    }
    off();
    expect(seen.slice(0, 2).map((m) => m.type)).toEqual(['terminal.failed', 'assistant']);
    expect((await client.session(sessionId).inspect())?.state).toBe('cancelled');
    expect(events).toContainEqual({
      kind: 'turnEnded',
      payload: { sessionId, turn: 1, status: 'cancelled', failureReason: null, cancelReason: 'from the test' },
    });
  });

  it('tells of a turn’s end once it is stored: a turnEnded listener that inspects the session sees it ended', async () => {
    const done = await client.sessions.enqueue({ prompt: 'three', options: { agent: 'flaky' } });
    const held = await client.sessions.enqueue({ prompt: 'four', options: { agent: 'flaky', hold: true } });
    for await (const message of client.session(held.sessionId).watch({ follow: true }))
      if (message.type === 'assistant') break;
    await client.session(held.sessionId).cancel('told');
    const told = async (sessionId: string) => {
      for (let i = 0; i < 200 && !statesWhenTold.has(`${sessionId}/1`); i += 1)
        await new Promise((resolve) => setTimeout(resolve, 25));
      return statesWhenTold.get(`${sessionId}/1`);
    };
    expect(await told(done.sessionId)).toBe('completed');
    expect(await told(held.sessionId)).toBe('cancelled');
  });

  it('every attempt ends once in the log: a call the agent left open is closed before its failure, and a cancel is a terminal.cancelled', async () => {
    const failed = await client.sessions.enqueue({ prompt: 'x', options: { agent: 'tooling', fail: true } });
    const failedLog = await collect(client.session(failed.sessionId).watch());
    expect(failedLog.map((m) => [m.type, m.content])).toEqual([
      ['tool.call', { toolCallId: 't1', name: 'bash', arguments: { command: 'sleep 100' } }],
      ['tool.failed', { toolCallId: 't1', name: 'bash', error: 'the attempt failed: bad_request' }],
      ['terminal.failed', expect.objectContaining({ category: 'bad_request' })],
    ]);

    const held = await client.sessions.enqueue({ prompt: 'y', options: { agent: 'tooling' } });
    const session = client.session(held.sessionId);
    for await (const message of session.watch({ follow: true })) if (message.type === 'tool.call') break;
    await session.cancel('enough');
    // The library's watch ends with the turn: its last message says the attempt was cancelled (the agent's late answer is not stored).
    const cancelledLog = await collect(session.watch());
    expect(cancelledLog.map((m) => [m.type, m.content])).toEqual([
      ['tool.call', { toolCallId: 't1', name: 'bash', arguments: { command: 'sleep 100' } }],
      ['tool.failed', { toolCallId: 't1', name: 'bash', error: 'the attempt was cancelled' }],
      ['terminal.cancelled', { reason: 'enough' }],
    ]);
    expect((await session.inspect())?.state).toBe('cancelled');

    // Only sessiond says an attempt was cancelled: an agent that does has failed (invalid_output), and the log says so.
    const lied = await client.sessions.enqueue({
      prompt: 'z',
      options: { agent: 'tooling', lie: true },
      retryPolicy: { maxAttempts: 1 },
    });
    const liedLog = await collect(client.session(lied.sessionId).watch());
    expect(liedLog.map((m) => m.type)).toEqual(['tool.call', 'tool.failed', 'terminal.failed']);
    expect(liedLog.at(-1)?.content).toMatchObject({ category: 'invalid_output' });
    expect((await client.session(lied.sessionId).inspect())?.state).toBe('failed');
  });

  it("refuses a custom agent's bad option naming the field, with nothing written; errors carry their stable code", async () => {
    const error = await client.sessions
      .enqueue({ sessionId: 'refused', prompt: 'x', options: { agent: 'flaky', hold: 'yes' } })
      .catch((e: unknown) => e);
    expect(hasErrorCode(error, 'invalid_input')).toBe(true);
    expect((error as Error).message).toContain('options.hold');
    expect(
      hasErrorCode(
        await client
          .session('refused')
          .inspect()
          .catch((e: unknown) => e),
        'not_found',
      ),
    ).toBe(true);
    const missing = await client
      .session('refused')
      .cancel()
      .catch((e: unknown) => e);
    expect(hasErrorCode(missing, 'not_found')).toBe(true);
    expect((await client.sessions.list({ state: 'completed' })).sessions.length).toBeGreaterThanOrEqual(1);
  });

  it('by noun: a failed turn retried from its handle, a shared watch, the queued prompts, dispatch, the deployment, a delete and its audit', async () => {
    // A turn that fails (one attempt allowed, and the flaky agent fails the first), then a turn retry: the same prompt as turn 2, which completes.
    const { sessionId } = await client.sessions.enqueue({
      prompt: 'five',
      options: { agent: 'flaky' },
      retryPolicy: { maxAttempts: 1 },
    });
    const session = client.session(sessionId);
    await collect(session.watch());
    expect((await session.inspect()).turn?.status).toBe('failed');
    expect(await session.retry()).toEqual({ sessionId, turn: 2, retryOf: 1 });
    const shared = await collect(session.watch({ shared: true }));
    expect(shared.map((m) => `${m.seq} ${m.turn}/${m.attempt} ${m.type}`)).toEqual([
      '1 1/1 terminal.failed',
      '2 2/1 assistant',
      '3 2/1 terminal.completed',
    ]);
    expect(await session.lastSeq()).toBe(3);
    expect((await session.messages({ from: 2, limit: 1 })).map((m) => m.seq)).toEqual([2]);

    // A prompt waiting behind a held turn is listed, then removed, and never runs (the session's own retry policy lets the flaky agent's second attempt run).
    expect((await client.retryPolicy.set({ maxAttempts: 2 }, { sessionId })).ok).toBe(true);
    await session.prompt({ prompt: 'six', options: { agent: 'flaky', hold: true } });
    for await (const message of session.watch({ from: 4, follow: true })) if (message.type === 'assistant') break;
    const { turn: waitingTurn } = await session.prompt({ prompt: 'seven' });
    const queued = await client.prompts.list(sessionId);
    expect(queued.map((p) => p.text)).toEqual(['seven']);
    expect(await client.prompts.remove(sessionId, queued[0]?.id ?? '')).toEqual({
      sessionId,
      promptId: queued[0]?.id,
      removed: true,
    });
    expect(await client.prompts.list(sessionId)).toEqual([]);
    await session.cancel('done with it');
    await collect(session.watch({ from: 4 }));
    expect((await session.inspect()).turn).toMatchObject({ index: waitingTurn - 1, status: 'cancelled' });

    // Dispatch: paused fleet-wide, then resumed.
    expect(await client.dispatch.pause()).toEqual({ paused: ['*'] });
    expect(await client.dispatch.status()).toEqual({ paused: true, limits: [] });
    expect((await client.dispatch.resume()).paused).toEqual([]);

    // The deployment: Redis answers, this worker's heartbeat, the policy's agents include ours.
    await client.deployment.ping();
    expect((await client.deployment.workers()).map((w) => w.id)).toContain(worker.id);
    // What it can run: the built-in agents and the library's own.
    const beat = (await client.deployment.workers()).find((w) => w.id === worker.id);
    expect(beat?.agents).toEqual(expect.arrayContaining(['pi', 'flaky']));
    expect((await client.deployment.policy()).agents).toContain('flaky');

    // Deleted once finished (its worker has let go of it), recorded in the audit with who asked; gone afterwards.
    for (let i = 0; i < 600 && (await session.inspect())?.heldBy != null; i += 1)
      await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await session.delete({ actor: 'app:test' })).toEqual({ sessionId, deleted: true, cancelled: false });
    expect((await client.sessions.deletions({ limit: 1 }))[0]).toMatchObject({
      sessionId,
      actor: 'app:test',
      outcome: 'deleted',
      force: false,
    });
    await expect(session.inspect()).rejects.toMatchObject({ code: 'not_found' });
  });
});

describe('createReader', () => {
  it("reads what the client reads — a session's view, its messages, live or not, the listing — and closes its connections", async () => {
    const reader = createReader({ redis: redis.url, prefix });
    try {
      const { sessionId } = await client.sessions.enqueue({ prompt: 'read me', options: { agent: 'flaky' } });
      // Live: the reader follows the turn from its first message to its end.
      const watched = await collect(reader.session(sessionId).watch());
      expect(watched.map((m) => m.type)).toEqual(['terminal.failed', 'assistant', 'terminal.completed']);
      const handle = client.session(sessionId);
      expect(await reader.session(sessionId).inspect()).toEqual(await handle.inspect());
      expect(await reader.session(sessionId).messages({ from: 2 })).toEqual(await handle.messages({ from: 2 }));
      expect(await reader.session(sessionId).lastSeq()).toBe(3);
      expect((await reader.sessions.list({ state: 'completed' })).sessions).toContainEqual({
        sessionId,
        state: 'completed',
      });
      expect(await reader.sessions.listingVersion()).toBe(await client.sessions.listingVersion());
      // The same refusals as the client's.
      await expect(reader.session('no such id').inspect()).rejects.toMatchObject({ code: 'invalid_input' });
      const refused = await reader
        .session('no such id')
        .messages()
        .catch((error: unknown) => error);
      expect(hasErrorCode(refused, 'invalid_input') && refused.issues[0]?.field).toBe('sessionId');
      await expect(reader.session('never-made').lastSeq()).rejects.toMatchObject({ code: 'not_found' });
    } finally {
      await reader.close();
    }
    await expect(reader.deployment.ping()).rejects.toThrow();
  });
});
