import { describe, expect, it } from 'vitest';
import { lifecycleKeys } from '../../../src/runtime/lifecycle/keys.ts';
import { removeSession } from '../../../src/runtime/lifecycle/remove.ts';
import { sweep } from '../../../src/runtime/lifecycle/sweeper.ts';
import { InputError, Runtime } from '../../../src/runtime/runtime.ts';
import type { SessionWorker } from '../../../src/runtime/worker.ts';
import { leftovers, scanSessionKeys } from '../../support/lifecycle.ts';
import type { PiEnv } from '../../support/pi-env.ts';
import type { RedisServer } from '../../support/redis.ts';
import {
  connector,
  harness,
  TEST_POLICY,
  turnEnded,
  until,
  useRuntimeSuite,
  type Harness,
} from '../../support/runtime.ts';
import { internals } from '../../../src/runtime/internals.ts';

/**
 * Retention: a finished session expires whole (no key of it left, checked by scanning), an active,
 * backing-off or queued one stays past the period, a revived one restarts its clock, and a clean-up
 * cut short is finished by the next sweep.
 */

const RETENTION_MS = 3000;
const FAILS_ONCE = 'retention-500-then-text';

let redis: RedisServer;
let env: PiEnv;
let h: Harness;
let worker: SessionWorker;
/** A second prefix with no worker: its sessions wait queued. */
let idle: Harness;

useRuntimeSuite(
  'retention',
  {
    scripts: {
      'slow-words': { text: Array.from({ length: 80 }, (_, i) => ` w${i}`), chunkDelayMs: 100 },
      [FAILS_ONCE]: [{ status: 500 }, { text: 'Recovered.' }],
    },
    cleanup: () => idle?.close(),
  },
  async (s) => {
    ({ redis, env, h } = s);
    worker = await s.h.startWorker({ retentionMs: RETENTION_MS, sweepIntervalMs: 200, sweepResumeAfterMs: 500 });
    idle = harness(redis.url, env, 'retention-idle');
  },
);

const opts = (model: string) => ({ provider: 'fake', model, cwd: env.cwd });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const gone = (id: string, timeoutMs = 20_000) =>
  until(
    async () => (await leftovers(internals(h.runtime).redis, internals(h.runtime).keys, id)).length === 0,
    timeoutMs,
    `${id} to expire`,
  );

describe('retention', { timeout: 120_000 }, () => {
  it('a finished session disappears whole once its retention has run out: no key of it is left', async () => {
    const { sessionId } = await h.runtime.enqueue({ prompt: 'Hello', options: opts('text') });
    await turnEnded(h.runtime, sessionId);
    const finishedAt = Date.now();
    expect(await scanSessionKeys(internals(h.runtime).redis, internals(h.runtime).keys, sessionId)).not.toEqual([]);
    await gone(sessionId);
    expect(Date.now() - finishedAt).toBeGreaterThan(RETENTION_MS - 500);
    // Expiry leaves no tombstone either: nothing of the session at all.
    expect(await scanSessionKeys(internals(h.runtime).redis, internals(h.runtime).keys, sessionId)).toEqual([]);
    expect(await h.runtime.getSession(sessionId)).toBeNull();
  });

  it('a session running a turn longer than the period stays, and expires once it has finished', async () => {
    const { sessionId } = await h.runtime.enqueue({ prompt: 'Talk slowly', options: opts('slow-words') });
    await until(async () => (await h.runtime.getSession(sessionId))?.state === 'running', 30_000, 'the turn to run');
    await sleep(RETENTION_MS + 1500);
    const during = await h.runtime.getSession(sessionId);
    expect(during?.state === 'running' || during?.state === 'completed').toBe(true);
    await turnEnded(h.runtime, sessionId, 1, 60_000);
    expect(await h.runtime.getSession(sessionId)).not.toBeNull();
    await gone(sessionId);
  });

  it('a session backing off longer than the period stays, and its retry still runs', async () => {
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Fail first',
      options: opts(FAILS_ONCE),
      retryPolicy: {
        initialDelayMs: RETENTION_MS + 2000,
        maxDelayMs: RETENTION_MS + 2000,
        jitter: 'none',
        maxAttempts: 2,
      },
    });
    await until(async () => (await h.runtime.getSession(sessionId))?.state === 'backoff', 30_000, 'the backoff');
    await sleep(RETENTION_MS + 1000);
    expect((await h.runtime.getSession(sessionId))?.state).toBe('backoff');
    const done = await turnEnded(h.runtime, sessionId, 1, 60_000);
    expect(done.state).toBe('completed');
    await gone(sessionId);
  });

  it('a queued session (no worker takes it) is never expired, even asked directly', async () => {
    const { sessionId } = await idle.runtime.enqueue({ prompt: 'Wait for a worker', options: opts('text') });
    const deps = {
      redis: internals(idle.runtime).redis,
      keys: internals(idle.runtime).keys,
      queue: internals(idle.runtime).queue,
      publish: () => Promise.resolve(),
    };
    expect(await removeSession(deps, sessionId, { mode: 'expire', retentionMs: 1 })).toMatchObject({
      outcome: 'active',
      state: 'queued',
    });
    // Even listed as due in the expiry index, the sweep leaves it (and drops the stale entry).
    await internals(idle.runtime).redis.zadd(lifecycleKeys(internals(idle.runtime).keys).finished, 1, sessionId);
    expect(await sweep(deps, { retentionMs: 1 })).toMatchObject({ ran: true, expired: 0 });
    expect((await idle.runtime.getSession(sessionId))?.queued).toHaveLength(1);
    expect(
      await internals(idle.runtime).redis.zscore(lifecycleKeys(internals(idle.runtime).keys).finished, sessionId),
    ).toBeNull();
  });

  it('a new prompt revives a finished session and restarts its clock', async () => {
    const { sessionId } = await h.runtime.enqueue({ prompt: 'First', options: opts('text') });
    await turnEnded(h.runtime, sessionId);
    const firstEnd = Date.now();
    await sleep(RETENTION_MS * 0.6);
    await h.runtime.enqueue({ sessionId, prompt: 'Second' });
    await turnEnded(h.runtime, sessionId, 2);
    const secondEnd = Date.now();
    // Past the first turn's expiry (plus some sweeps) it is still whole, with both turns.
    await sleep(Math.max(0, firstEnd + RETENTION_MS + 1000 - Date.now()));
    expect(Date.now()).toBeLessThan(secondEnd + RETENTION_MS);
    expect((await h.runtime.getSession(sessionId))?.context?.turnIndex).toBe(2);
    await gone(sessionId);
    expect(Date.now() - secondEnd).toBeGreaterThan(RETENTION_MS - 500);
  });

  it('an expiry cut short after its mark leaves a clean-up that the next sweep finishes', async () => {
    const { sessionId } = await idle.runtime.enqueue({ prompt: 'Run me elsewhere', options: opts('text') });
    // Finished by a worker of that prefix, then stopped: the sweeps below are the test's own.
    const w = await idle.startWorker({ retentionMs: 60_000, sweepIntervalMs: 3_600_000 });
    await turnEnded(idle.runtime, sessionId);
    await w.close(2000);
    const deps = {
      redis: internals(idle.runtime).redis,
      keys: internals(idle.runtime).keys,
      queue: internals(idle.runtime).queue,
      publish: () => Promise.resolve(),
    };
    await until(
      async () =>
        (await internals(idle.runtime).store.leaseHolder(sessionId)) === null &&
        (await internals(idle.runtime).store.activeJobId(sessionId)) === null,
      5000,
      'the release',
    );
    expect(await removeSession(deps, sessionId, { mode: 'expire', retentionMs: 1, stopAfter: 'mark' })).toMatchObject({
      outcome: 'stopped',
    });
    expect(await scanSessionKeys(internals(idle.runtime).redis, internals(idle.runtime).keys, sessionId)).not.toEqual(
      [],
    );
    expect(await sweep(deps, { retentionMs: 1, resumeAfterMs: 0 })).toMatchObject({ resumed: 1 });
    expect(await leftovers(internals(idle.runtime).redis, internals(idle.runtime).keys, sessionId)).toEqual([]);
    expect(await scanSessionKeys(internals(idle.runtime).redis, internals(idle.runtime).keys, sessionId)).toEqual([]);
  });

  it('a session stored before the lifecycle indexes existed is indexed by the sweeper, counted by state, and expires like the others', async () => {
    const ids: string[] = [];
    const w = await idle.startWorker({ retentionMs: 60_000, sweepIntervalMs: 3_600_000 });
    for (const prompt of ['Old one', 'Old two']) {
      const { sessionId } = await idle.runtime.enqueue({ prompt, options: opts('text') });
      await turnEnded(idle.runtime, sessionId);
      ids.push(sessionId);
    }
    await w.close(2000);
    // What an older sessiond left: listed, but in no state set and not in the expiry index.
    const lk = lifecycleKeys(internals(idle.runtime).keys);
    const r = internals(idle.runtime).redis;
    await r.hdel(lk.states, ...ids);
    await r.zrem(lk.byState('completed'), ...ids);
    await r.zrem(lk.finished, ...ids);
    await r.del(lk.backfill);
    expect((await idle.runtime.listPage({ state: 'completed' })).sessions.map((s) => s.sessionId)).not.toContain(
      ids[0],
    );
    const deps = {
      redis: r,
      keys: internals(idle.runtime).keys,
      queue: internals(idle.runtime).queue,
      publish: () => Promise.resolve(),
    };

    expect(await sweep(deps, { retentionMs: 60_000 })).toMatchObject({ ran: true, backfilled: 2, expired: 0 });
    expect((await idle.runtime.listPage({ state: 'completed' })).sessions.map((s) => s.sessionId)).toEqual(
      expect.arrayContaining(ids),
    );
    const updatedAt = Number(await r.hget(internals(idle.runtime).keys.session(ids[0] as string, 'meta'), 'updatedAt'));
    expect(Number(await r.zscore(lk.finished, ids[0] as string))).toBe(updatedAt + 60_000);
    // The walk is through: later sweeps do not look again.
    expect(await r.get(lk.backfill)).toBe('done');
    expect(await sweep(deps, { retentionMs: 60_000 })).toMatchObject({ backfilled: 0 });

    // Indexed, they expire like any finished session: whole.
    for (const id of ids) await r.zadd(lk.finished, 1, id);
    expect(await sweep(deps, { retentionMs: 1 })).toMatchObject({ expired: 2 });
    for (const id of ids) expect(await scanSessionKeys(r, internals(idle.runtime).keys, id)).toEqual([]);
    expect(await leftovers(r, internals(idle.runtime).keys, ids[0] as string)).toEqual([]);
  });

  it('a session may choose its own retention at enqueue, within the deployment maximum', async () => {
    const { connect, closeAll } = connector(redis.url);
    const runtime = new Runtime({
      connect,
      prefix: h.prefix,
      limits: { maxRetentionMs: 3_600_000 },
      policy: TEST_POLICY,
    });
    try {
      await expect(runtime.enqueue({ prompt: 'Keep me long', retention: '2h' })).rejects.toThrow(InputError);
      await expect(runtime.enqueue({ prompt: 'Keep me forever', retention: '0' })).rejects.toThrow(
        /retention: must be at most 3600000 ms/,
      );
      await expect(runtime.enqueue({ prompt: 'Keep me', retention: 'soon' })).rejects.toThrow(
        /retention: invalid duration/,
      );
      // Longer than the deployment's default (3 s here): kept past it, on its own clock.
      const { sessionId } = await runtime.enqueue({
        prompt: 'Keep me an hour',
        retention: '1h',
        options: opts('text'),
      });
      await turnEnded(h.runtime, sessionId);
      await sleep(RETENTION_MS + 1500);
      expect(await h.runtime.getSession(sessionId)).toMatchObject({ state: 'completed' });
      const expireAt = Number(
        await internals(h.runtime).redis.zscore(lifecycleKeys(internals(h.runtime).keys).finished, sessionId),
      );
      expect(expireAt).toBeGreaterThan(Date.now() + 3_500_000);
      expect(await runtime.deleteSession(sessionId)).toMatchObject({ deleted: true });
    } finally {
      await runtime.close();
      closeAll();
    }
    expect(worker.activeSessions).toEqual([]);
  });
});
