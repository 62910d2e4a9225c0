import { describe, expect, it } from 'vitest';
import type { Runtime } from '../../src/runtime/runtime.ts';
import { DEFAULT_TEXT, type FakeModelServer } from '../support/fake-model-server.ts';
import { httpPi, rules, runtimeWith } from '../support/limits.ts';
import type { PiEnv } from '../support/pi-env.ts';
import { turnEnded, until, type Harness, useRuntimeSuite } from '../support/runtime.ts';
import { internals } from '../../src/runtime/internals.ts';

/**
 * Fleet-wide limits: attempts under a limit never exceed it across workers, a session waiting for
 * capacity holds no worker slot and shows what it waits for, a hold whose worker went away comes
 * back when its lease lapses, a rate limit with a Retry-After pauses the whole key (one probe after
 * it), and dispatch can be paused and resumed.
 */

const SLOW = 'limits-slow';
const OTHER = 'limits-other';
const PI_ACME = 'limits-pi-acme';
const PI_GLOBEX = 'limits-pi-globex';

let server: FakeModelServer;
let env: PiEnv;
let h: Harness;

/** The fake model's answer: after a pause, so attempts overlap. */
const slow = { text: DEFAULT_TEXT, headersDelayMs: 150, chunkDelayMs: 0 };

useRuntimeSuite(
  'limits',
  {
    scripts: {
      [SLOW]: slow,
      [OTHER]: slow,
      [PI_ACME]: { text: DEFAULT_TEXT, headersDelayMs: 400, chunkDelayMs: 0 },
      [PI_GLOBEX]: { text: DEFAULT_TEXT, headersDelayMs: 400, chunkDelayMs: 0 },
    },
  },
  (s) => {
    ({ server, env, h } = s);
  },
);

async function limitsIdle(rt: Runtime): Promise<void> {
  await until(
    async () => {
      const view = await rt.limitsView();
      return view.limits.every((l) => l.inUse === 0 && l.waiting === 0);
    },
    30_000,
    'every limit to be free',
  );
}

describe('fleet limits', () => {
  it('200 sessions under maxConcurrent 5 on two workers: never more than 5 requests in flight, every session completes, nothing left held', async () => {
    const fleetLimits = rules([{ name: 'slow-model', match: { model: SLOW }, maxConcurrent: 5 }]);
    const rt = runtimeWith(h, fleetLimits);
    const runtime = h.runtime;
    const workers = await Promise.all(
      [1, 2].map(() =>
        h.startWorker({
          concurrency: 8,
          agentOptions: { pi: httpPi(env, h, server.url) },
          fleetLimits,
          limitPollMs: 30_000,
        }),
      ),
    );
    try {
      const ids: string[] = [];
      for (let i = 0; i < 200; i += 1) {
        const { sessionId } = await runtime.enqueue({
          prompt: `hello ${i}`,
          options: { provider: 'fake', model: SLOW, cwd: env.cwd },
        });
        ids.push(sessionId);
      }
      // While they run, some wait for the limit: shown with its name, holding no worker slot.
      const waiting = await until(
        async () => {
          for (const id of ids.slice(-50)) {
            const s = await runtime.getSession(id);
            if (s?.state === 'waiting' && s.heldBy === null) return s;
          }
          return null;
        },
        60_000,
        'a session waiting for the limit',
      );
      expect(waiting.context?.waitingFor).toMatchObject({ limit: 'slow-model', reason: 'full' });
      expect(waiting.context?.turn?.attempts).toEqual([]);
      const sessions = await Promise.all(ids.map((id) => turnEnded(runtime, id, 1, 600_000)));
      expect(sessions.map((s) => s.state)).toEqual(ids.map(() => 'completed'));
      // One attempt each: waiting spent no attempt.
      expect(sessions.every((s) => s.context?.turn?.attempts.length === 1)).toBe(true);
      expect(server.requestsFor(SLOW)).toHaveLength(200);
      const peak = server.peakInFlight(SLOW);
      console.log(JSON.stringify({ test: 'limits-200', sessions: 200, maxConcurrent: 5, peakInFlight: peak }));
      expect(peak).toBeLessThanOrEqual(5);
      expect(peak).toBeGreaterThanOrEqual(2);
      await limitsIdle(rt);
    } finally {
      await Promise.all(workers.map((w) => w.close(2000)));
      await rt.close();
    }
  }, 900_000);

  it('a hold left by a worker that went away comes back when its lease lapses; the waiting session then runs', async () => {
    const fleetLimits = rules([{ name: 'one-at-a-time', match: { model: OTHER }, maxConcurrent: 1 }]);
    const rt = runtimeWith(h, fleetLimits);
    // A worker that died holding the only slot: its hold is never renewed nor released.
    const dead = await internals(rt).fleetLimits.acquire(
      'dead-worker-session',
      [{ name: 'one-at-a-time', key: 'one-at-a-time', maxConcurrent: 1, maxStartsPerMinute: 0, maxTokensPerMinute: 0 }],
      {
        priority: 0,
        holdTtlMs: 3000,
        pollMs: 1000,
      },
    );
    expect(dead.ok).toBe(true);
    const worker = await h.startWorker({
      agentOptions: { pi: httpPi(env, h, server.url) },
      fleetLimits,
      limitPollMs: 60_000,
    });
    try {
      const { sessionId } = await rt.enqueue({
        prompt: 'after the dead one',
        options: { provider: 'fake', model: OTHER, cwd: env.cwd },
      });
      const waiting = await until(
        async () => {
          const s = await rt.getSession(sessionId);
          return s?.state === 'waiting' && s.heldBy === null ? s : null;
        },
        30_000,
        'the session to wait',
      );
      expect(waiting.context?.waitingFor?.limit).toBe('one-at-a-time');
      expect((await rt.limitsView()).limits[0]).toMatchObject({ name: 'one-at-a-time', inUse: 1, waiting: 1 });
      // Its poll is a minute away: what starts it is the lapsed hold (3 s lease), found by the worker.
      const done = await turnEnded(h.runtime, sessionId, 1, 30_000);
      expect(done.state).toBe('completed');
      expect(done.context?.turn?.attempts).toHaveLength(1);
      await limitsIdle(rt);
    } finally {
      await worker.close(2000);
      await rt.close();
    }
  }, 120_000);

  it('real pi under maxConcurrent 2 by tenant: each tenant has its own 2, and a tenant never has more than 2 requests in flight', async () => {
    const fleetLimits = rules([{ match: { tenant: '*' }, maxConcurrent: 2 }]);
    const rt = runtimeWith(h, fleetLimits);
    expect(fleetLimits[0]?.name).toBe('tenant=*');
    const worker = await h.startWorker({ concurrency: 8, fleetLimits, limitPollMs: 30_000 });
    try {
      const model = { acme: PI_ACME, globex: PI_GLOBEX } as const;
      const ids: string[] = [];
      for (const tenant of ['acme', 'globex'] as const) {
        for (let i = 0; i < 4; i += 1) {
          const { sessionId } = await rt.enqueue({
            prompt: `hi ${tenant} ${i}`,
            tenant,
            options: { provider: 'fake', model: model[tenant], cwd: env.cwd },
          });
          ids.push(sessionId);
        }
      }
      const sessions = await Promise.all(ids.map((id) => turnEnded(h.runtime, id, 1, 300_000)));
      expect(sessions.map((s) => s.state)).toEqual(ids.map(() => 'completed'));
      // Each tenant's requests (one model each) never more than 2 at once; some sessions waited.
      expect(server.requestsFor(PI_ACME)).toHaveLength(4);
      expect(server.peakInFlight(PI_ACME)).toBeLessThanOrEqual(2);
      expect(server.peakInFlight(PI_GLOBEX)).toBeLessThanOrEqual(2);
      expect(sessions.some((s) => s.history.some((t) => t.to === 'waiting'))).toBe(true);
      expect(sessions.every((s) => s.context?.turn?.attempts.length === 1)).toBe(true);
      await limitsIdle(rt);
    } finally {
      await worker.close(2000);
      await rt.close();
    }
  }, 400_000);
});
