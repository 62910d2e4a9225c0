import { describe, expect, it } from 'vitest';
import type { SessionRecord } from '../../src/runtime/runtime.ts';
import type { PiEnv } from '../support/pi-env.ts';
import type { RedisServer } from '../support/redis.ts';
import { assistantText, expectWholeLog, turnEnded, until, type Harness, useRuntimeSuite } from '../support/runtime.ts';

/**
 * Redis (AOF, fsync always) restarted while workers drive sessions: the workers reconnect, the
 * sessions finish, no prompt is lost and no message is lost or written twice; enqueueing works
 * after the restart, and an enqueue made while Redis is down completes once it is back.
 */

const SLOW = 'restart-slow-text';
const SLOW_TEXT = 'alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi';

let redis: RedisServer;
let env: PiEnv;
let h: Harness;

// About 3 s of streaming per request: the restart lands in the middle.
useRuntimeSuite(
  'redis-restart',
  { aof: true, scripts: { [SLOW]: { text: SLOW_TEXT, chunkDelayMs: 200 } } },
  async (s) => {
    ({ redis, env, h } = s);
    await h.startWorker({ concurrency: 3 });
  },
);

const options = () => ({ provider: 'fake', model: SLOW, cwd: env.cwd });

async function expectFinished(sessionId: string, turns: number): Promise<SessionRecord> {
  const session = await turnEnded(h.runtime, sessionId, turns, 60_000);
  expect(session.state).toBe('completed');
  expect(session.queued).toEqual([]);
  expect(session.context?.finishedPromptIds).toHaveLength(turns);
  const messages = await h.runtime.readMessages(sessionId);
  expectWholeLog(messages);
  for (let turn = 1; turn <= turns; turn++) {
    const ofTurn = messages.filter((m) => m.turn === turn);
    const last = Math.max(...ofTurn.map((m) => m.attempt));
    // The answer of the attempt that completed is whole and not doubled (no batch written twice).
    expect(assistantText(ofTurn.filter((m) => m.attempt === last))).toBe(SLOW_TEXT);
    expect(ofTurn.filter((m) => m.type === 'terminal.completed')).toHaveLength(1);
  }
  // A restart shorter than the lease TTL interrupts nothing; a longer one may cost an interrupted
  // attempt (retried), never a failed turn.
  const outcomes = session.context?.turn?.attempts.map((a) => a.outcome) ?? [];
  expect(outcomes.at(-1)).toBe('completed');
  expect(outcomes.slice(0, -1).every((o) => o === 'interrupted')).toBe(true);
  return session;
}

describe('Redis restarted mid-run (AOF on)', () => {
  it('workers reconnect and every session finishes; enqueue works after the restart', async () => {
    const sessions = await Promise.all(
      [1, 2, 3].map((i) => h.runtime.enqueue({ prompt: `Recite ${i}`, options: options() })),
    );
    // All three mid-stream: part of each answer is in the log.
    await until(
      async () => {
        const logs = await Promise.all(sessions.map((s) => h.runtime.readMessages(s.sessionId)));
        return logs.every((log) => assistantText(log).length > 0 && !log.some((m) => m.type === 'terminal.completed'));
      },
      30_000,
      'every session mid-answer',
    );

    await redis.restart();

    for (const { sessionId } of sessions) await expectFinished(sessionId, 1);

    // After the restart: a new session and a second turn of an old one.
    const fresh = await h.runtime.enqueue({ prompt: 'After the restart', options: options() });
    const first = sessions[0];
    if (first === undefined) throw new Error('no session');
    expect((await h.runtime.enqueue({ sessionId: first.sessionId, prompt: 'Once more' })).turn).toBe(2);
    await expectFinished(fresh.sessionId, 1);
    await expectFinished(first.sessionId, 2);
  });

  it('an enqueue made while Redis is down completes once it is back, and its turn runs', async () => {
    const running = await h.runtime.enqueue({ prompt: 'Recite during a crash', options: options() });
    await until(
      async () => assistantText(await h.runtime.readMessages(running.sessionId)).length > 0,
      30_000,
      'the answer to start',
    );

    await redis.kill(); // SIGKILL: only what the AOF holds survives (fsync always: every acknowledged write)
    const pending = h.runtime.enqueue({ prompt: 'Sent while Redis was down', options: options() });
    await redis.restart();
    const late = await pending;
    expect(late.turn).toBe(1);

    await expectFinished(running.sessionId, 1);
    await expectFinished(late.sessionId, 1);
  });
});
