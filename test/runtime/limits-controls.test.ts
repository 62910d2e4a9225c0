import { describe, expect, it } from 'vitest';
import { DEFAULT_TEXT, type FakeModelServer, type ScriptStep } from '../support/fake-model-server.ts';
import { httpPi, rules, runtimeWith } from '../support/limits.ts';
import type { PiEnv } from '../support/pi-env.ts';
import { turnEnded, until, type Harness, useRuntimeSuite } from '../support/runtime.ts';

/**
 * What operators see and steer around fleet limits: a rate limit with a Retry-After cools the whole
 * key down (no request during the cooldown, one probe after it, other keys not held back), priorities
 * order the waiters, and dispatch pauses and resumes (fleet-wide or per limit) with running turns
 * finishing and cancels still working. The agent is a shell script making one real HTTP request.
 */

const STORM = 'controls-storm';
const CALM = 'controls-calm';
const ONE = 'controls-one';
const PAUSE = 'controls-pause';
const PAUSE_CALM = 'controls-pause-calm';

let server: FakeModelServer;
let env: PiEnv;
let h: Harness;

const answer = (headersDelayMs: number): ScriptStep => ({ text: DEFAULT_TEXT, headersDelayMs, chunkDelayMs: 0 });

useRuntimeSuite(
  'limits-controls',
  {
    scripts: {
      // The provider's 429 with Retry-After 2 s for the first request; answers (slowly) after that.
      [STORM]: ({ index }) => (index === 0 ? { status: 429, headers: { 'retry-after': '2' } } : answer(300)),
      [CALM]: answer(100),
      // The first answer (the blocker's) comes late: every other session queues behind it.
      [ONE]: ({ index }) => answer(index === 0 ? 5000 : 300),
      [PAUSE_CALM]: answer(100),
      [PAUSE]: answer(1500),
    },
  },
  (s) => {
    ({ server, env, h } = s);
  },
);

const options = (model: string) => ({ provider: 'fake', model, cwd: env.cwd });

describe('shared cooldowns, priorities, paused dispatch', () => {
  it('a 429 with Retry-After 2 s cools its key down: no request during the cooldown, one probe after it, the other key not held back', async () => {
    const fleetLimits = rules([
      { name: 'storm', match: { model: STORM }, maxConcurrent: 50 },
      { name: 'calm', match: { model: CALM }, maxConcurrent: 50 },
    ]);
    const rt = runtimeWith(h, fleetLimits);
    const worker = await h.startWorker({
      concurrency: 16,
      agentOptions: { pi: httpPi(env, h, server.url) },
      fleetLimits,
      limitPollMs: 30_000,
    });
    try {
      const first = await rt.enqueue({
        prompt: 'storm 0',
        options: options(STORM),
        retryPolicy: { jitter: 'none', initialDelayMs: 100, maxAttempts: 4 },
      });
      // The 429 came back: the key cools down until its Retry-After.
      const cooldownUntil = await until(
        async () => (await rt.limitsView()).limits.find((l) => l.name === 'storm')?.keys[0]?.cooldownUntil ?? null,
        60_000,
        'the cooldown',
      );
      const cooledAt = Date.now();
      const storm: string[] = [];
      const calm: string[] = [];
      for (let i = 1; i <= 12; i += 1)
        storm.push((await rt.enqueue({ prompt: `storm ${i}`, options: options(STORM) })).sessionId);
      for (let i = 0; i < 8; i += 1)
        calm.push((await rt.enqueue({ prompt: `calm ${i}`, options: options(CALM) })).sessionId);
      const all = await Promise.all(
        [first.sessionId, ...storm, ...calm].map((id) => turnEnded(h.runtime, id, 1, 300_000)),
      );
      expect(all.map((s) => s.state)).toEqual(all.map(() => 'completed'));

      const stormRequests = server.requestsFor(STORM);
      const during = stormRequests.filter((r) => r.at >= cooledAt && r.at < cooldownUntil);
      const after = stormRequests.filter((r) => r.at >= cooldownUntil).sort((a, b) => a.at - b.at);
      const probe = after[0];
      if (probe === undefined) throw new Error('no request after the cooldown');
      // Until the probe's answer (300 ms after it arrived) came back, nothing else was let through.
      const beforeProbeAnswered = after.filter((r) => r.at < probe.at + 300);
      console.log(
        JSON.stringify({
          test: 'limits-429-storm',
          retryAfterMs: 2000,
          requestsDuringCooldown: during.length,
          probesBeforeItsAnswer: beforeProbeAnswered.length,
          stormRequests: stormRequests.length,
        }),
      );
      expect(during).toHaveLength(0);
      expect(beforeProbeAnswered).toHaveLength(1);
      // 1 rate-limited + the probe + every other storm session once: no stampede of retries.
      expect(stormRequests).toHaveLength(1 + 13);
      // The storm sessions waited for the cooldown, with the limit's name; the calm ones never waited.
      // (A session parked while waiting is restored into `waiting` at its next activation.)
      const parked = (s: (typeof all)[number]): boolean =>
        s.history.some((t) => t.to === 'waiting' && t.event === 'session.restored');
      expect(all.slice(1, 13).every(parked)).toBe(true);
      expect(all.slice(13).some(parked)).toBe(false);
      expect(all.slice(13).every((s) => s.context?.turn?.attempts.length === 1)).toBe(true);
    } finally {
      await worker.close(2000);
      await rt.close();
    }
  }, 400_000);

  it('under a full limit the waiting session with the higher priority starts first', async () => {
    const fleetLimits = rules([{ name: 'one', match: { model: ONE }, maxConcurrent: 1 }]);
    const rt = runtimeWith(h, fleetLimits);
    const worker = await h.startWorker({
      concurrency: 8,
      agentOptions: { pi: httpPi(env, h, server.url) },
      fleetLimits,
      limitPollMs: 30_000,
    });
    try {
      const blocker = await rt.enqueue({ prompt: 'first', options: options(ONE) });
      await until(async () => server.requestsFor(ONE).length === 1, 120_000, 'the blocker to reach the model');
      const low: string[] = [];
      for (let i = 0; i < 3; i += 1)
        low.push((await rt.enqueue({ prompt: `low ${i}`, options: options(ONE) })).sessionId);
      // Every low one waits before the high one arrives: first come would put it last.
      await until(
        async () => {
          const states = await Promise.all(low.map((id) => rt.getSession(id)));
          return states.every((s) => s?.state === 'waiting');
        },
        60_000,
        'the low-priority sessions to wait',
      );
      const high = await rt.enqueue({ prompt: 'urgent', options: options(ONE), priority: 10 });
      expect(high.created).toBe(true);
      const ended = await Promise.all(
        [blocker.sessionId, ...low, high.sessionId].map((id) => turnEnded(h.runtime, id, 1, 300_000)),
      );
      expect(ended.map((s) => s.state)).toEqual(ended.map(() => 'completed'));
      const startOf = (i: number): number => ended[i]?.context?.turn?.attempts[0]?.startedAt ?? Number.NaN;
      const highStart = startOf(4);
      expect([1, 2, 3].every((i) => highStart < startOf(i))).toBe(true);
      // The low ones in the order they came.
      expect(startOf(1)).toBeLessThan(startOf(2));
      expect(startOf(2)).toBeLessThan(startOf(3));
    } finally {
      await worker.close(2000);
      await rt.close();
    }
  }, 300_000);

  it('paused dispatch: the running turn finishes, nothing new starts, a cancel still works; resume starts the rest; a limit pauses alone', async () => {
    const fleetLimits = rules([{ name: 'calm', match: { model: PAUSE_CALM }, maxConcurrent: 10 }]);
    const rt = runtimeWith(h, fleetLimits);
    const worker = await h.startWorker({
      concurrency: 8,
      agentOptions: { pi: httpPi(env, h, server.url) },
      fleetLimits,
      limitPollMs: 30_000,
    });
    try {
      const running = await rt.enqueue({ prompt: 'long one', options: options(PAUSE) });
      await until(async () => server.requestsFor(PAUSE).length === 1, 60_000, 'the long turn to reach the model');
      expect((await rt.pauseDispatch()).paused).toEqual(['*']);
      // The pause reaches the worker over pub/sub (or its next look, within leaseTtlMs/3).
      await until(async () => worker.dispatchPaused, 30_000, 'the worker to know dispatch is paused');
      const requested = (): number => server.requestsFor(PAUSE).length + server.requestsFor(PAUSE_CALM).length;
      const before = requested();
      const queued: string[] = [];
      for (let i = 0; i < 3; i += 1)
        queued.push(
          (await rt.enqueue({ prompt: `while paused ${i}`, options: options(i === 0 ? PAUSE_CALM : PAUSE) })).sessionId,
        );
      const waiting = await until(
        async () => {
          const states = await Promise.all(queued.map((id) => rt.getSession(id)));
          return states.every((s) => s?.state === 'waiting' && s.heldBy === null) ? states : null;
        },
        60_000,
        'the new sessions to wait',
      );
      expect(waiting.map((s) => s?.context?.waitingFor?.reason)).toEqual(['paused', 'paused', 'paused']);
      // The turn that was running finishes.
      expect((await turnEnded(h.runtime, running.sessionId, 1, 120_000)).state).toBe('completed');
      // A waiting session can be cancelled.
      await rt.cancel(queued[2] as string);
      expect((await turnEnded(h.runtime, queued[2] as string, 1, 60_000)).state).toBe('cancelled');
      expect(requested()).toBe(before);

      // Resumed fleet-wide, but paused under `calm`: the other session runs, the calm one still waits.
      await rt.pauseDispatch('calm');
      const resumed = await rt.resumeDispatch();
      expect(resumed.paused).toEqual(['calm']);
      expect((await turnEnded(h.runtime, queued[1] as string, 1, 120_000)).state).toBe('completed');
      const calmOne = await rt.getSession(queued[0] as string);
      expect(calmOne?.state).toBe('waiting');
      expect(calmOne?.context?.waitingFor).toMatchObject({ limit: 'calm', reason: 'paused' });
      await expect(rt.pauseDispatch('nope')).rejects.toThrow(/limit: no limit is named "nope"/);
      await rt.resumeDispatch('calm');
      expect((await turnEnded(h.runtime, queued[0] as string, 1, 120_000)).state).toBe('completed');
      expect(server.requestsFor(PAUSE_CALM)).toHaveLength(1);
    } finally {
      await worker.close(2000);
      await rt.close();
    }
  }, 300_000);
});
