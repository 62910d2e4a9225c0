import { describe, expect, it } from 'vitest';
import { findProcessesByMarker } from '../../src/process/index.ts';
import { newJobId } from '../../src/runtime/queue.ts';
import { StaleLeaseError } from '../../src/runtime/store/session-store.ts';
import type { SessionWorker } from '../../src/runtime/worker.ts';
import type { FakeModelServer } from '../support/fake-model-server.ts';
import type { PiEnv } from '../support/pi-env.ts';
import {
  assistantText,
  BACKENDS,
  expectWholeLog,
  agentRecords,
  sessionDump,
  turnEnded,
  until,
  type Harness,
  useRuntimeSuite,
} from '../support/runtime.ts';
import { internals } from '../../src/runtime/internals.ts';

/**
 * Single activation: a session is driven by at most one worker, even when a lease runs out under
 * its holder (a paused event loop, a partition) or BullMQ delivers an activation twice. Every
 * write is fenced by the lease token; a holder with a stale token writes nothing and stops its agent.
 */

const SLOW = 'lease-slow-text';
/** First request: bash `sleep 1000`; any later one (a retry) answers with text. */
const TOOL_ONCE = 'lease-long-tool-once';
const SLOW_TEXT = 'one two three four five six seven eight nine ten eleven twelve';

let server: FakeModelServer;
let env: PiEnv;
let h: Harness;

const staleBatch = {
  snapshot: '{"stale":true}',
  state: 'failed',
  inboxTrim: 1,
  clearCancel: true,
  history: [JSON.stringify({ at: 0, from: 'x', to: 'y', event: 'stale' })],
  agentState: [['pi:stale', 'stale'] as [string, string]],
  messages: [{ turn: 1, attempt: 1, type: 'assistant', content: JSON.stringify({ text: 'STALE-A' }) }],
};

// On one Redis and on a real Redis Cluster (the fenced scripts touch one slot: the session's).
describe.each(BACKENDS)('single activation: the lease and its fencing token, on %s Redis', (backend) => {
  useRuntimeSuite(
    `lease-${backend}`,
    {
      backend,
      scripts: {
        // About 2 s of streaming: long enough to act while a worker drives the session.
        [SLOW]: { text: SLOW_TEXT, chunkDelayMs: 150 },
        [TOOL_ONCE]: ({ index }) =>
          index === 0 ? { toolCalls: [{ name: 'bash', arguments: { command: 'sleep 1000' } }] } : { text: 'Done.' },
      },
    },
    (s) => {
      ({ server, env, h } = s);
    },
  );

  let workerB: SessionWorker;

  it('an expired lease is taken over by another worker; the stale holder (its old token) writes nothing', async () => {
    const { store } = internals(h.runtime);
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Count to twelve',
      options: { provider: 'fake', model: SLOW, cwd: env.cwd },
    });

    // "Worker A" takes the lease, then stalls past its TTL without renewing it.
    const a = await store.acquire(sessionId, 'worker-A', 300);
    if (!a.ok) throw new Error('worker A did not get the lease');
    expect(await store.acquire(sessionId, 'worker-C', 300)).toMatchObject({
      ok: false,
      reason: 'busy',
      holder: a.token,
    });
    await until(async () => (await store.leaseHolder(sessionId)) === null, 5_000, "A's lease to expire");

    // Worker B takes the session (a later fence) and drives it.
    workerB = await h.startWorker();
    const heldByB = await until(async () => {
      const holder = await store.leaseHolder(sessionId);
      return holder?.startsWith(`${workerB.id}#`) === true ? holder : null;
    });
    expect(Number(heldByB.split('#').at(-1))).toBeGreaterThan(a.fence);

    // While B drives it, A wakes up and tries to write: refused, atomically, every kind of write.
    await expect(store.write(sessionId, a.token, staleBatch)).rejects.toBeInstanceOf(StaleLeaseError);
    expect(await store.renew(sessionId, a.token, 3000)).toBe(false);
    expect(await store.release(sessionId, a.token, 'keep')).toBe(-1);
    expect(await store.leaseHolder(sessionId)).toBe(heldByB);

    const session = await turnEnded(h.runtime, sessionId);
    expect(session.state).toBe('completed');
    const messages = await h.runtime.readMessages(sessionId);
    expectWholeLog(messages);
    expect(assistantText(messages)).toBe(SLOW_TEXT);
    expect(JSON.stringify(messages)).not.toContain('STALE-A');
    expect(session.history.map((t) => t.event)).not.toContain('stale');

    // And once B is done: A's token is still refused and nothing of the session changes.
    await until(async () => (await store.leaseHolder(sessionId)) === null, 10_000, 'B to release the session');
    const before = await sessionDump(internals(h.runtime).redis, internals(h.runtime).keys, sessionId);
    await expect(store.write(sessionId, a.token, staleBatch)).rejects.toBeInstanceOf(StaleLeaseError);
    expect(await store.release(sessionId, a.token, 'idle')).toBe(-1);
    expect(await sessionDump(internals(h.runtime).redis, internals(h.runtime).keys, sessionId)).toEqual(before);
  });

  // The rest is the same code on a cluster: only the takeover above runs there too.
  if (backend === 'single') {
    it('a holder whose renewal fails (its lease was taken) stops its agent and writes nothing more', async () => {
      const { store } = internals(h.runtime);
      const { sessionId } = await h.runtime.enqueue({
        prompt: 'Sleep',
        options: { provider: 'fake', model: TOOL_ONCE, cwd: env.cwd },
        retryPolicy: { initialDelayMs: 100, jitter: 'none' },
      });
      await until(
        async () => (await h.runtime.readMessages(sessionId)).some((m) => m.type === 'tool.call'),
        30_000,
        'the long tool to start',
      );
      const [record] = await until(async () => {
        const records = await agentRecords(sessionId);
        return records[0]?.pid != null ? records : null;
      });
      if (record === undefined) throw new Error('no agent process recorded');
      // pi and its `sleep 1000` are running under the session's marker.
      await until(
        async () => (await findProcessesByMarker(record.marker)).length >= 2,
        10_000,
        'pi and its tool process',
      );
      const holder = await store.leaseHolder(sessionId);
      expect(holder?.startsWith(`${workerB.id}#`)).toBe(true);

      // Another worker takes the lease over (as after an expiry): from this instant every write of B is refused.
      await internals(h.runtime).redis.set(store.key(sessionId, 'lease'), 'intruder#999', 'PX', 120_000);
      const atTakeover = await sessionDump(internals(h.runtime).redis, internals(h.runtime).keys, sessionId);

      // B's next renewal fails: it stops the agent's whole tree and gives the session up…
      await until(
        async () => (await findProcessesByMarker(record.marker)).length === 0,
        20_000,
        'the stale holder to stop its agent',
      );
      await until(
        async () => !workerB.activeSessions.includes(sessionId),
        20_000,
        'the stale holder to let the session go',
      );
      // …having written nothing: not the agent's last messages, not a transition, not the snapshot.
      expect(await sessionDump(internals(h.runtime).redis, internals(h.runtime).keys, sessionId)).toEqual(atTakeover);
      expect(await store.leaseHolder(sessionId)).toBe('intruder#999');
      expect((await h.runtime.getSession(sessionId))?.context?.turn?.status).toBe('running');

      // The intruder goes away without a word: the session's activation is found again (the
      // reconciler re-adds its job), the attempt B ran is recorded interrupted, and a retry completes it.
      await internals(h.runtime).redis.del(store.key(sessionId, 'lease'));
      const session = await turnEnded(h.runtime, sessionId, 1, 45_000);
      expect(session.state).toBe('completed');
      expect(session.context?.turn?.attempts.map((x) => x.outcome)).toEqual(['interrupted', 'completed']);
      expectWholeLog(await h.runtime.readMessages(sessionId));
      expect(server.requestsFor(TOOL_ONCE)).toHaveLength(2);
    });

    it('an activation delivered twice while the session is driven does not run it twice', async () => {
      const { store } = internals(h.runtime);
      const second = await h.startWorker();
      server.reset();
      const { sessionId } = await h.runtime.enqueue({
        prompt: 'Count again',
        options: { provider: 'fake', model: SLOW, cwd: env.cwd },
      });
      await until(async () => server.requestsFor(SLOW).length === 1, 30_000, 'the model request');
      const holder = await store.leaseHolder(sessionId);
      expect(holder).not.toBeNull();

      // At-least-once delivery: more activation jobs for the same session while one worker drives it.
      const duplicates = [newJobId(sessionId), newJobId(sessionId)];
      for (const jobId of duplicates) await internals(h.runtime).queue.addActivation(sessionId, jobId);

      const session = await turnEnded(h.runtime, sessionId);
      expect(session.state).toBe('completed');
      // The duplicates are taken (by either worker), find the session busy or done, and end without running it.
      await until(
        async () =>
          (await Promise.all(duplicates.map((id) => internals(h.runtime).queue.queue.getJob(id)))).every(
            (job) => job === undefined,
          ),
        30_000,
        'the duplicate jobs to finish',
      );
      expect(server.requestsFor(SLOW)).toHaveLength(1);
      const after = await h.runtime.getSession(sessionId);
      expect(after?.context?.turn?.attempts).toHaveLength(1);
      expect(after?.history.filter((t) => t.to === 'running')).toHaveLength(1);
      const messages = await h.runtime.readMessages(sessionId);
      expectWholeLog(messages);
      expect(messages.filter((m) => m.type === 'session.started')).toHaveLength(1);
      expect(messages.filter((m) => m.type.startsWith('terminal.'))).toHaveLength(1);
      expect(assistantText(messages)).toBe(SLOW_TEXT);
      expect([...workerB.activeSessions, ...second.activeSessions]).not.toContain(sessionId);
    });
  }
});
