import type { Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { InputError, NotFoundError } from '../../src/runtime/runtime.ts';
import type { PiEnv } from '../support/pi-env.ts';
import { turnEnded, until, type Harness, useRuntimeSuite } from '../support/runtime.ts';
import { internals } from '../../src/runtime/internals.ts';

/**
 * Bad input gets a clear error naming what is wrong, and writes nothing: refused requests
 * (enqueue, cancel, policy), malformed activation jobs, jobs for sessions that do not exist.
 */

let env: PiEnv;
let h: Harness;
let existing: string;

useRuntimeSuite('bad-input', {}, (s) => {
  ({ env, h } = s);
});

/**
 * Every key of the prefix with its value: the sessions' own keys (`<prefix>:{s:…}:…`) and the
 * fleet-wide ones (`{<prefix>}:…`: sessions and activations indexes, policy), except the worker
 * heartbeats (they tick). BullMQ's keys are left to the job counts.
 */
async function prefixState(r: Redis, prefix: string): Promise<Record<string, unknown>> {
  const keys = [...(await r.keys(`${prefix}*`)), ...(await r.keys(`{${prefix}}*`))]
    .filter((k) => k !== `{${prefix}}:workers`)
    .sort();
  const state: Record<string, unknown> = {};
  for (const key of keys) {
    const type = await r.type(key);
    if (type === 'string') state[key] = await r.get(key);
    else if (type === 'hash') state[key] = await r.hgetall(key);
    else if (type === 'list') state[key] = await r.lrange(key, 0, -1);
    else if (type === 'zset') state[key] = await r.zrange(key, 0, -1, 'WITHSCORES');
    else if (type === 'stream') state[key] = await r.xrange(key, '-', '+');
    else state[key] = type;
  }
  return state;
}

async function refused(call: Promise<unknown>): Promise<InputError> {
  const error = await call.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(InputError);
  return error as InputError;
}

describe('bad input: clear errors, nothing written', () => {
  it('refused enqueue requests name the field and write nothing (not a key, not a job)', async () => {
    // No worker yet: nothing else writes, so the whole database must stay as it is. (The queue
    // writes its own meta key once connected: a command on its connection waits for that.)
    await internals(h.runtime).queue.queue.getJobCounts();
    const before = await internals(h.runtime).redis.dbsize();
    const keysBefore = await internals(h.runtime).redis.keys('*');

    const policy = await refused(h.runtime.enqueue({ prompt: 'hi', retryPolicy: { maxAttempts: 0 } }));
    expect(policy.issues).toEqual([
      { field: 'retryPolicy.maxAttempts', message: expect.stringContaining('must be an integer from 1 to 100') },
    ]);
    expect(policy.message).toContain('retryPolicy.maxAttempts');
    const policyField = await refused(h.runtime.enqueue({ prompt: 'hi', retryPolicy: { retryOn: ['cosmic_rays'] } }));
    expect(policyField.issues[0]?.field).toBe('retryPolicy.retryOn');
    const policyUnknown = await refused(h.runtime.enqueue({ prompt: 'hi', retryPolicy: { maxAtempts: 3 } }));
    expect(policyUnknown.issues[0]?.field).toBe('retryPolicy.maxAtempts');

    // What runs on the worker's host is never a caller's choice.
    const command = await refused(h.runtime.enqueue({ prompt: 'hi', options: { command: 'rm' } }));
    expect(command.issues[0]?.field).toBe('options');
    expect(command.message).toContain('command');
    const hostEnv = await refused(h.runtime.enqueue({ prompt: 'hi', options: { env: { PATH: '/tmp' } } }));
    expect(hostEnv.message).toContain('env');
    const agent = await refused(h.runtime.enqueue({ prompt: 'hi', options: { agent: 'nope' } }));
    expect(agent.issues[0]?.field).toBe('options.agent');
    const idle = await refused(h.runtime.enqueue({ prompt: 'hi', options: { idleTimeoutMs: 5 } }));
    expect(idle.issues[0]?.field).toBe('options.idleTimeoutMs');

    expect((await refused(h.runtime.enqueue({ prompt: '   ' }))).issues[0]?.field).toBe('prompt');
    expect((await refused(h.runtime.enqueue({ prompt: 'x'.repeat(200_001) }))).issues[0]?.field).toBe('prompt');
    expect((await refused(h.runtime.enqueue({}))).issues[0]?.field).toBe('prompt');
    expect((await refused(h.runtime.enqueue({ sessionId: 'x:y', prompt: 'hi' }))).issues[0]?.field).toBe('sessionId');
    expect((await refused(h.runtime.enqueue({ prompt: 'hi', colour: 'red' }))).message).toContain('colour');
    expect((await refused(h.runtime.enqueue(null))).issues[0]?.field).toBe('(body)');

    // The global policy refuses the same way, and keeps what it had.
    const global = await h.runtime.setPolicy({ maxAttempts: 0 });
    expect(global).toMatchObject({ ok: false, errors: [{ field: 'maxAttempts' }] });
    expect(await h.runtime.getPolicy()).toMatchObject({ source: 'default' });

    expect(await internals(h.runtime).redis.dbsize()).toBe(before);
    expect((await internals(h.runtime).redis.keys('*')).sort()).toEqual(keysBefore.sort());
    expect(await internals(h.runtime).queue.queue.getJobCounts()).toEqual(
      expect.objectContaining({ waiting: 0, delayed: 0, active: 0, completed: 0, failed: 0 }),
    );
  });

  it('an unknown session id: getSession → null, cancel/policy → NotFoundError, a bad id → InputError; nothing written', async () => {
    await h.startWorker();
    existing = (
      await h.runtime.enqueue({ prompt: 'A real one', options: { provider: 'fake', model: 'text', cwd: env.cwd } })
    ).sessionId;
    await turnEnded(h.runtime, existing);
    // The end of its activation reaches the fleet index a moment after the turn (batched per tick).
    await until(
      async () => (await internals(h.runtime).redis.zscore(internals(h.runtime).keys.activations, existing)) === null,
    );
    const before = await prefixState(internals(h.runtime).redis, h.prefix);

    expect(await h.runtime.getSession('no-such-session')).toBeNull();
    expect(await h.runtime.getSession('x:y')).toBeNull();
    await expect(h.runtime.cancel('no-such-session')).rejects.toBeInstanceOf(NotFoundError);
    await expect(h.runtime.cancel('no-such-session')).rejects.toThrow('unknown session "no-such-session"');
    const badId = await refused(h.runtime.cancel('x:y'));
    expect(badId.issues[0]?.field).toBe('sessionId');
    await expect(h.runtime.getPolicy('no-such-session')).rejects.toBeInstanceOf(NotFoundError);
    await expect(h.runtime.setPolicy({ maxAttempts: 2 }, 'no-such-session')).rejects.toBeInstanceOf(NotFoundError);
    await expect(h.runtime.resetPolicy('no-such-session')).rejects.toBeInstanceOf(NotFoundError);
    expect(await h.runtime.readMessages('no-such-session')).toEqual([]);
    await refused(h.runtime.readMessages('x:y'));

    expect(await prefixState(internals(h.runtime).redis, h.prefix)).toEqual(before);
  });

  it('malformed activation jobs and jobs for unknown sessions are taken, refused with a reason, and change nothing', async () => {
    const before = await prefixState(internals(h.runtime).redis, h.prefix);
    const queue = internals(h.runtime).queue.queue;
    const keep = { removeOnComplete: false, removeOnFail: false, attempts: 1 };
    const jobs: Array<[Job, RegExp]> = [
      [await queue.add('activate', {}, keep), /^ignored: job data: sessionId must match/],
      [
        await queue.add('activate', { sessionId: 'x:y' }, keep),
        /^ignored: job data: sessionId must match .* \(got "x:y"\)/,
      ],
      [await queue.add('activate', { sessionId: 42 }, keep), /^ignored: job data: sessionId must match .* \(got 42\)/],
      [await queue.add('activate', 'not an object', keep), /^ignored: job data/],
      [await queue.add('something-else', { sessionId: existing }, keep), /^ignored: unknown job name$/],
      [await queue.add('activate', { sessionId: 'no-such-session' }, keep), /^ignored: unknown session$/],
    ];
    for (const [job, reason] of jobs) {
      const state = await until(
        async () => {
          const s = await job.getState();
          return s === 'completed' || s === 'failed' ? s : null;
        },
        20_000,
        `job ${job.id} to be processed`,
      );
      const done = await queue.getJob(job.id ?? '');
      expect({ state, returnvalue: done?.returnvalue as unknown }).toEqual({
        state: 'completed',
        returnvalue: expect.stringMatching(reason),
      });
    }

    // No session appeared, the real one is untouched, and nothing else under the prefix changed.
    expect(await h.runtime.getSession('no-such-session')).toBeNull();
    expect(await h.runtime.listSessions()).toEqual([{ sessionId: existing, state: 'completed' }]);
    expect(await prefixState(internals(h.runtime).redis, h.prefix)).toEqual(before);
    for (const [job] of jobs) await job.remove();
  });
});
