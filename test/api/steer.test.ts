import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  createClient,
  createWorker,
  defineAgent,
  type Client,
  type StoredMessage,
  type Worker,
} from '../../src/index.ts';
import { startRedis, uniquePrefix, type RedisServer } from '../support/redis.ts';
import { until } from '../support/runtime.ts';

/**
 * whenBusy "steer" through a library agent's native channel (`steering: 'native'`): the steers reach its running
 * turn in order, each recorded once (`prompt.steered via native`); a steer the turn ended without taking becomes
 * the next turn, and the log says so. Real redis-server, real workers; the agents are the test's own (in-process),
 * so the test decides when their turns end.
 */

/** Prompts whose attempt runs now (the agent has started and waits). */
const running = new Set<string>();
/** Opened by the test: the `deaf` agent's attempts end then. */
let openGate: () => void = () => undefined;
const gate = new Promise<void>((resolve) => (openGate = resolve));
/** Per prompt: the `tooly` agent's tool ends when the test calls it. */
const toolGates = new Map<string, () => void>();
const openToolGate = (prompt: string): void => toolGates.get(prompt)?.();

// Takes every steer into its turn: says so, tells sessiond, and ends after the one that says "last".
const steerable = defineAgent({
  name: 'steerable',
  options: z.object({}),
  steering: 'native',
  async *run({ prompt, steering }) {
    yield { type: 'session.started', content: { sessionId: `steerable-${prompt}` } };
    yield { type: 'assistant', content: { text: `asked: ${prompt}\n` } };
    running.add(prompt);
    if (steering === undefined) throw new Error('no steering channel for a native agent');
    for await (const steer of steering.pending()) {
      steering.delivered(steer.promptId);
      yield { type: 'assistant', content: { text: `steered: ${steer.text}\n` } };
      if (steer.text.includes('last')) break;
    }
    yield { type: 'terminal.completed', content: { stopReason: 'end' } };
  },
});

// Native too, but never reads its steers: its turn ends when the test opens the gate.
const deaf = defineAgent({
  name: 'deaf',
  options: z.object({}),
  steering: 'native',
  async *run({ prompt }) {
    yield { type: 'session.started', content: { sessionId: `deaf-${prompt}` } };
    running.add(prompt);
    await gate;
    yield { type: 'assistant', content: { text: `done: ${prompt}` } };
    yield { type: 'terminal.completed', content: { stopReason: 'end' } };
  },
});

// No native channel: the fallback. Its tool waits for the gate; a run whose prompt is a steer says what it got.
const tooly = defineAgent({
  name: 'tooly',
  options: z.object({}),
  async *run({ prompt, agentSessionId }) {
    yield agentSessionId === null
      ? { type: 'session.started', content: { sessionId: 'tooly-1' } }
      : { type: 'session.resumed', content: { sessionId: agentSessionId } };
    if (prompt.startsWith('steer:')) {
      yield { type: 'assistant', content: { text: `got ${prompt}` } };
      yield { type: 'terminal.completed', content: { stopReason: 'end' } };
      return;
    }
    yield { type: 'tool.call', content: { toolCallId: 'w1', name: 'bash', arguments: { command: 'wait' } } };
    const opened = new Promise<void>((resolve) => toolGates.set(prompt, resolve));
    running.add(prompt);
    await opened;
    yield { type: 'tool.completed', content: { toolCallId: 'w1', name: 'bash', result: 'opened' } };
    yield { type: 'assistant', content: { text: 'not steered' } };
    yield { type: 'terminal.completed', content: { stopReason: 'end' } };
  },
});

let redis: RedisServer;
let client: Client;
let worker: Worker;

beforeAll(async () => {
  redis = await startRedis();
  const prefix = uniquePrefix('steer-native');
  // Workspaces off: not what this suite tests, and the default would write under the host's state dir.
  worker = createWorker({ redis: redis.url, prefix, agents: [steerable, deaf, tooly], workspaces: false });
  await worker.start();
  client = createClient({ redis: redis.url, prefix, agents: [steerable, deaf, tooly] });
});

afterAll(async () => {
  await client?.close();
  await worker?.close();
  await redis?.stop();
});

const steeredIn = (log: StoredMessage[]) =>
  log.filter((m) => m.type === 'prompt.steered').map((m) => ({ turn: m.turn, attempt: m.attempt, content: m.content }));

async function turnDone(sessionId: string, turn: number) {
  return until(async () => {
    const view = await client.session(sessionId).inspect();
    return view.turn?.index === turn && view.turn.status === 'completed' ? view : null;
  });
}

describe('whenBusy "steer" through a native channel', () => {
  it('each steer reaches the running turn once, in order: prompt.steered via native, no new turn', async () => {
    const { sessionId } = await client.sessions.enqueue({ prompt: 'native-1', options: { agent: 'steerable' } });
    await until(async () => running.has('native-1'));
    const first = await client.session(sessionId).prompt({ prompt: 'go left', whenBusy: 'steer' });
    const second = await client.session(sessionId).prompt({ prompt: 'the last: go right', whenBusy: 'steer' });
    expect(first).toMatchObject({ turn: 1, steered: true });
    expect(second).toMatchObject({ turn: 1, steered: true });

    const view = await turnDone(sessionId, 1);
    expect(view.steers).toEqual([]);
    const log = await client.session(sessionId).messages();
    expect(steeredIn(log)).toEqual([
      { turn: 1, attempt: 1, content: { promptId: first.promptId, via: 'native', at: expect.any(Number) } },
      { turn: 1, attempt: 1, content: { promptId: second.promptId, via: 'native', at: expect.any(Number) } },
    ]);
    expect(
      log
        .filter((m) => m.type === 'assistant')
        .map((m) => (m.content as { text: string }).text)
        .join(''),
    ).toBe('asked: native-1\nsteered: go left\nsteered: the last: go right\n');
    expect(log.filter((m) => m.type.startsWith('terminal.')).map((m) => m.type)).toEqual(['terminal.completed']);
  });

  it('without a native channel (the fallback): the attempt stops at the tool boundary and the agent goes on with the steer, same turn and attempt', async () => {
    const { sessionId } = await client.sessions.enqueue({ prompt: 'tooly-1', options: { agent: 'tooly' } });
    await until(async () => running.has('tooly-1'));
    const steer = await client.session(sessionId).prompt({ prompt: 'steer: the red one', whenBusy: 'steer' });
    expect(steer).toMatchObject({ turn: 1, steered: true });
    openToolGate('tooly-1');

    const view = await turnDone(sessionId, 1);
    expect(view.steers).toEqual([]);
    expect(view.turn?.attempts.map((a) => a.outcome)).toEqual(['completed']);
    const log = await client.session(sessionId).messages();
    // Recorded delivered once the agent's state holds it: with the run's completed end, before the attempt's end.
    expect(log.map((m) => `${m.attempt} ${m.type}`)).toEqual([
      '1 session.started',
      '1 tool.call',
      '1 tool.completed',
      '1 session.resumed',
      '1 assistant',
      '1 prompt.steered',
      '1 terminal.completed',
    ]);
    expect(steeredIn(log)).toEqual([
      { turn: 1, attempt: 1, content: { promptId: steer.promptId, via: 'restart', at: expect.any(Number) } },
    ]);
    expect(log.find((m) => m.type === 'assistant')?.content).toEqual({ text: 'got steer: the red one' });
  });

  it('50 concurrent steers (the fallback): each delivered once, in the order they were accepted, in one restart', async () => {
    const { sessionId } = await client.sessions.enqueue({ prompt: 'tooly-50', options: { agent: 'tooly' } });
    await until(async () => running.has('tooly-50'));
    const accepted = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        client.session(sessionId).prompt({ prompt: `steer: ${i}`, whenBusy: 'steer' }),
      ),
    );
    expect(accepted.every((a) => a.steered && a.turn === 1)).toBe(true);
    const pending = (await client.session(sessionId).inspect()).steers;
    expect(pending.map((p) => p.id).sort()).toEqual(accepted.map((a) => a.promptId).sort());
    openToolGate('tooly-50');

    const view = await turnDone(sessionId, 1);
    expect(view.steers).toEqual([]);
    const log = await client.session(sessionId).messages();
    expect(steeredIn(log).map((m) => (m.content as { promptId: string }).promptId)).toEqual(pending.map((p) => p.id));
    expect(log.find((m) => m.type === 'assistant')?.content).toEqual({
      text: `got ${pending.map((p) => p.text).join('\n\n')}`,
    });
  });

  it('a steer the turn ends without taking becomes the next turn, and the log says so: never lost', async () => {
    const { sessionId } = await client.sessions.enqueue({ prompt: 'deaf-1', options: { agent: 'deaf' } });
    await until(async () => running.has('deaf-1'));
    const steer = await client.session(sessionId).prompt({ prompt: 'deaf-2', whenBusy: 'steer' });
    expect(steer).toMatchObject({ turn: 1, steered: true });
    expect((await client.session(sessionId).inspect()).steers).toEqual([
      { id: steer.promptId, text: 'deaf-2', acceptedAt: expect.any(Number) },
    ]);
    openGate();

    const view = await turnDone(sessionId, 2);
    expect(view.steers).toEqual([]);
    const log = await client.session(sessionId).messages();
    expect(steeredIn(log)).toEqual([
      { turn: 2, attempt: 0, content: { promptId: steer.promptId, via: 'turn', turn: 2, at: expect.any(Number) } },
    ]);
    // Turn 2 ran the steer's text as its prompt, once.
    expect(
      log.filter((m) => m.type === 'assistant').map((m) => [m.turn, (m.content as { text: string }).text]),
    ).toEqual([
      [1, 'done: deaf-1'],
      [2, 'done: deaf-2'],
    ]);
  });
});
