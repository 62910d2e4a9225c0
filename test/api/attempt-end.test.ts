import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  createClient,
  createWorker,
  defineAgent,
  type Client,
  type StoredMessage,
  type Worker,
  type WorkerEvents,
} from '../../src/index.ts';
import { startRedis, uniquePrefix, type RedisServer } from '../support/redis.ts';
import { collect } from '../support/processes.ts';

/**
 * Every attempt ends once in the log, however its agent ends it (issue 28): a provider that throws or ends
 * without a terminal, a log cap reached with a call open, a worker gone mid-attempt. Library agents, a real
 * redis-server, real workers.
 */

const runs = new Map<string, number>();

// Opens a tool call, then: throws, ends without a terminal, chatters until stopped, or (its first run) holds until stopped.
const broken = defineAgent({
  name: 'broken',
  options: z.object({ mode: z.enum(['throw', 'silent', 'chatty', 'hold']) }),
  async *run({ prompt, options, signal }) {
    const run = (runs.get(prompt) ?? 0) + 1;
    runs.set(prompt, run);
    yield { type: 'session.started', content: { sessionId: `broken-${prompt}` } };
    yield { type: 'tool.call', content: { toolCallId: `t${run}`, name: 'bash', arguments: { command: 'make' } } };
    if (options.mode === 'throw') throw new Error('boom');
    if (options.mode === 'silent') return;
    if (options.mode === 'chatty') {
      for (let i = 0; i < 20 && !signal.aborted; i++) yield { type: 'assistant', content: { text: `line ${i}\n` } };
    }
    if (options.mode === 'hold' && run === 1)
      await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
    yield { type: 'terminal.completed', content: { stopReason: 'end' } };
  },
});

const LOG_CAP = 4;
let redis: RedisServer;
let prefix: string;
let client: Client;
let worker: Worker;
const failures: Array<WorkerEvents['attemptFailed']> = [];

beforeAll(async () => {
  redis = await startRedis();
  prefix = uniquePrefix('attempt-end');
  // Workspaces off: not what this suite tests, and the default would write under the host's state dir.
  worker = createWorker({
    redis: redis.url,
    prefix,
    agents: [broken],
    lifecycle: { maxLogMessages: LOG_CAP },
    workspaces: false,
  });
  worker.on('attemptFailed', (failure) => failures.push(failure));
  await worker.start();
  client = createClient({ redis: redis.url, prefix, agents: [broken] });
});

afterAll(async () => {
  await client?.close();
  await worker?.close();
  await redis?.stop();
});

const shape = (log: StoredMessage[]) => log.map((m) => `${m.attempt} ${m.type}`);

describe('an attempt whose agent does not end it', () => {
  it.each([
    ['throw', 'the provider threw: boom'],
    ['silent', 'the provider ended without a terminal message'],
  ] as const)(
    'a provider that %s: its open call is closed and one terminal.failed (process_crash) is stored, and told',
    async (mode, text) => {
      const { sessionId } = await client.sessions.enqueue({
        prompt: mode,
        options: { agent: 'broken', mode },
        retryPolicy: { maxAttempts: 1 },
      });
      const log = await collect(client.session(sessionId).watch());
      expect(shape(log)).toEqual(['1 session.started', '1 tool.call', '1 tool.failed', '1 terminal.failed']);
      expect(log[2]?.content).toEqual({ toolCallId: 't1', name: 'bash', error: 'the attempt failed: process_crash' });
      expect(log[3]?.content).toMatchObject({ category: 'process_crash', text });
      const view = await client.session(sessionId).inspect();
      expect(view.turn).toMatchObject({
        status: 'failed',
        attempts: [{ outcome: 'failed', category: 'process_crash' }],
      });
      expect(failures).toContainEqual({ sessionId, turn: 1, attempt: 1, category: 'process_crash', text });
    },
  );

  it('the closing tool.failed counts against maxLogMessages: the log stays within the cap', async () => {
    const { sessionId } = await client.sessions.enqueue({
      prompt: 'chatty',
      options: { agent: 'broken', mode: 'chatty' },
      retryPolicy: { maxAttempts: 1 },
    });
    const log = await collect(client.session(sessionId).watch());
    // Room for the call's close was held when the call came: the assistant line that would have taken it is refused.
    expect(shape(log)).toEqual(['1 session.started', '1 tool.call', '1 tool.failed', '1 terminal.failed']);
    expect(log[3]?.content).toMatchObject({ category: 'quota' });
    expect(log.length).toBeLessThanOrEqual(LOG_CAP);
  });
});

describe('an attempt its worker left', () => {
  it('the next worker writes its end (the call closed, terminal.failed process_crash) and tells it as a failed attempt', async () => {
    const gone = createWorker({
      redis: redis.url,
      prefix: `${prefix}-left`,
      agents: [broken],
      shutdownGraceMs: 100,
      workspaces: false,
    });
    await gone.start();
    const left = createClient({ redis: redis.url, prefix: `${prefix}-left`, agents: [broken] });
    try {
      const { sessionId } = await left.sessions.enqueue({ prompt: 'hold', options: { agent: 'broken', mode: 'hold' } });
      for await (const message of left.session(sessionId).watch({ follow: true }))
        if (message.type === 'tool.call') break;
      // Graceful: the attempt is stopped and left recorded as running, for the next holder to find interrupted.
      await gone.close();
      const told: Array<WorkerEvents['attemptFailed']> = [];
      const next = createWorker({ redis: redis.url, prefix: `${prefix}-left`, agents: [broken], workspaces: false });
      next.on('attemptFailed', (failure) => told.push(failure));
      await next.start();
      try {
        const log = await collect(left.session(sessionId).watch());
        expect(shape(log)).toEqual([
          '1 session.started',
          '1 tool.call',
          '1 tool.failed',
          '1 terminal.failed',
          '2 session.started',
          '2 tool.call',
          // An answer with a call still open closes it too ('the attempt ended').
          '2 tool.failed',
          '2 terminal.completed',
        ]);
        expect(log[3]?.content).toMatchObject({ category: 'process_crash' });
        expect(told).toEqual([
          { sessionId, turn: 1, attempt: 1, category: 'process_crash', text: expect.stringContaining('interrupted') },
        ]);
      } finally {
        await next.close();
      }
    } finally {
      await left.close();
    }
  });
});
