import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Runtime } from '../../src/runtime/runtime.ts';
import { AGENT_COMMAND, FAKE_MODEL } from '../../chaos/cluster.ts';
import { readLog } from '../../chaos/checks.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';
import { harness, TEST_POLICY, turnEnded, until, type Harness } from '../support/runtime.ts';
import type { PiEnv } from '../support/pi-env.ts';

/**
 * Bugs `npm run chaos` found, each pinned by a small deterministic test.
 */

let redis: RedisServer;

beforeAll(async () => {
  // AOF with fsync always, as in `npm run chaos`: every fenced write takes a little longer.
  redis = await startRedis({ aof: true });
});

afterAll(async () => {
  await redis?.stop();
});

describe('found by chaos: prompts arriving in bursts while a session is driven', () => {
  let h: Harness;
  let stateDir: string;

  beforeAll(async () => {
    stateDir = mkdtempSync(join(tmpdir(), 'sessiond-chaos-regression-'));
    // The fake agent needs no pi environment: only a session dir, and where to count attempts.
    const env = {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      sessionDir: join(stateDir, 'sessions'),
    } as unknown as PiEnv;
    h = harness(redis.url, env, 'burst');
    await h.startWorker({
      concurrency: 1,
      agentOptions: {
        pi: {
          command: AGENT_COMMAND,
          sessionDir: join(stateDir, 'sessions'),
          env: { CHAOS_STATE_DIR: join(stateDir, 'attempts'), CHAOS_NODE: process.execPath },
        },
      },
    });
  });

  afterAll(async () => {
    await h?.close();
    if (stateDir !== undefined) rmSync(stateDir, { recursive: true, force: true });
  });

  it('prompts sent by several clients one right after the other while a turn runs: each runs as its own turn, in order (the inbox is never trimmed past what was taken)', async () => {
    const sessionId = 'burst-1';
    const first = await h.runtime.enqueue({ sessionId, prompt: 'ok:1500 #p0', options: { model: FAKE_MODEL } });
    expect(first.turn).toBe(1);
    await until(
      async () => (await h.runtime.readMessages(sessionId)).some((m) => m.type === 'assistant'),
      20_000,
      'the first turn to stream',
    );
    // Several clients sending prompts one right after the other while turn 1 runs: the holder takes
    // each in as it is told of it, reading the inbox again before its batched trim has landed.
    const tags: string[] = ['p0'];
    const clients = [
      h.runtime,
      ...[1, 2, 3].map(() => new Runtime({ connect: h.connect, prefix: h.prefix, policy: TEST_POLICY })),
    ];
    await Promise.all(
      clients.map(async (client, c) => {
        for (let i = 1; i <= 12; i++) {
          const { turn } = await client.enqueue({
            sessionId,
            prompt: `ok:20 #c${c}-${i}`,
            options: { model: FAKE_MODEL },
          });
          tags[turn - 1] = `c${c}-${i}`;
        }
      }),
    );
    await Promise.all(clients.slice(1).map((client) => client.close()));
    const turns = tags.length;
    const session = await turnEnded(h.runtime, sessionId, turns, 40_000);
    expect(session.state).toBe('completed');
    expect(session.queued).toEqual([]);
    expect(session.context?.finishedPromptIds).toHaveLength(turns);
    const log = await readLog(h.runtime, sessionId);
    for (let turn = 1; turn <= turns; turn++) {
      const text = log
        .filter((m) => m.turn === turn && m.type === 'assistant')
        .map((m) => (m.content as { text: string }).text)
        .join('');
      expect(text.startsWith(`[${tags[turn - 1]}]`), `turn ${turn}: ${text.slice(0, 40)}`).toBe(true);
    }
  });

  it(
    'a cancel that lands after the agent answered, while its attempt cleans up, does not turn a completed answer into a cancelled turn',
    { timeout: 120_000 },
    async () => {
      // The agent prints its last text, ends its message ~40 ms later and exits: cancels sent 0-78 ms
      // after the last text land before, during and after the end of the attempt (with the faster sweep
      // of an ended attempt's processes, cancels sent 30-70 ms after it all landed after the end). Every
      // fourth turn streams for a second and is cancelled at its first text, so that the cancelled side
      // is there on a host of any speed; the race itself is the other turns'.
      const mismatches: string[] = [];
      const outcomes = { completed: 0, cancelled: 0 };
      for (let i = 0; i < 40; i++) {
        const sessionId = `late-cancel-${i}`;
        const early = i % 4 === 0;
        await h.runtime.enqueue({
          sessionId,
          prompt: `ok:${early ? 1000 : 100} #late${i}`,
          options: { model: FAKE_MODEL },
        });
        const controller = new AbortController();
        for await (const m of h.runtime.followMessages(sessionId, 1, controller.signal)) {
          if (m.type === 'assistant' && (m.content as { text: string }).text.includes(early ? 'w0' : 'w2')) {
            if (!early) await new Promise((r) => setTimeout(r, 2 * i));
            await h.runtime.cancel(sessionId);
            controller.abort();
            break;
          }
        }
        const session = await turnEnded(h.runtime, sessionId, 1, 20_000);
        // Exactly one terminal message, and it says how the turn ended (issue 28: a cancelled one too).
        const terminals = (await readLog(h.runtime, sessionId))
          .filter((m) => m.type.startsWith('terminal.'))
          .map((m) => m.type);
        if (session.state === 'completed' || session.state === 'cancelled') outcomes[session.state] += 1;
        if (JSON.stringify(terminals) !== JSON.stringify([`terminal.${session.state}`]))
          mismatches.push(
            `${sessionId}: ended ${session.state}, terminal messages in the log: ${terminals.join(', ')}`,
          );
      }
      expect(mismatches).toEqual([]);
      // Both sides of the race were exercised.
      expect(outcomes.completed).toBeGreaterThan(0);
      expect(outcomes.cancelled).toBeGreaterThan(0);
    },
  );
});
