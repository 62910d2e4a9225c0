import { describe, expect, it, vi } from 'vitest';
import { persistSession, startSessionActor } from '../../machines/restore.ts';
import { createSessionMachine } from '../../machines/session.machine.ts';
import type { RetryPolicy } from '../../src/retry/index.ts';
import { FakeRunner, type Step } from './fake-runner.ts';
import { ctx, policy, settle, state, useFakeClock } from './harness.ts';

const HOUR = 3_600_000;

function start(steps: Step[], retryPolicy: RetryPolicy) {
  const runner = new FakeRunner(steps);
  const machine = createSessionMachine(runner.run, runner.sink);
  const actor = startSessionActor(machine, { input: { sessionId: 's1', policy: retryPolicy } });
  actor.send({ type: 'session.prompt', prompt: { id: 'p1', text: 'hello' } });
  return { runner, actor, machine };
}

// A 429 whose Retry-After (one hour) lies past maxRetryAfterMs (10 min by default): a quota wall.
const wall: Step = { kind: 'fail', category: 'rate_limited', retryAfterMs: HOUR };

useFakeClock();

describe('session machine: quota walls', () => {
  it('parks until the reset without spending an attempt, then resumes by itself at the reset', async () => {
    const { actor, runner } = start([wall, { kind: 'complete' }], policy({ maxAttempts: 1 }));
    await settle();
    expect(state(actor)).toBe('parked');
    const parkedAt = Date.now();
    const turn = ctx(actor).turn!;
    expect(turn).toMatchObject({
      status: 'parked',
      freeWalls: 1,
      quotaWall: { until: parkedAt + HOUR, free: true, category: 'rate_limited' },
    });
    expect(turn.attempts.map((a) => a.quotaWall)).toEqual(['free']);
    expect(ctx(actor).nextRetryAt).toBe(parkedAt + HOUR);
    await vi.advanceTimersByTimeAsync(HOUR - 1);
    expect(runner.requests).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    await settle();
    // maxAttempts 1, yet a second attempt ran: the wall's attempt was free.
    expect(state(actor)).toBe('completed');
    expect(runner.requests).toHaveLength(2);
    expect(ctx(actor).turn!.quotaWall).toBeNull();
  });

  it('session.resume ends the park at once', async () => {
    const { actor, runner } = start([wall, { kind: 'complete' }], policy());
    await settle();
    expect(state(actor)).toBe('parked');
    actor.send({ type: 'session.resume' });
    await settle();
    expect(state(actor)).toBe('completed');
    expect(runner.requests).toHaveLength(2);
  });

  it('counted: the wall spends an attempt, so with maxAttempts 1 the turn fails attempts_exhausted and never parks', async () => {
    const { actor, runner } = start([wall], policy({ maxAttempts: 1, rateLimitAttempts: 'counted' }));
    await settle();
    expect(state(actor)).toBe('failed');
    expect(ctx(actor).turn!.failureReason).toBe('attempts_exhausted');
    expect(runner.requests).toHaveLength(1);
  });

  it('counted with attempts left: parks, and the wall is counted', async () => {
    const { actor } = start([wall, wall], policy({ maxAttempts: 2, rateLimitAttempts: 'counted' }));
    await settle();
    expect(state(actor)).toBe('parked');
    expect(ctx(actor).turn!.attempts.map((a) => a.quotaWall)).toEqual(['counted']);
    await vi.advanceTimersByTimeAsync(HOUR);
    await settle();
    // The second wall finds both attempts spent.
    expect(state(actor)).toBe('failed');
    expect(ctx(actor).turn!.failureReason).toBe('attempts_exhausted');
  });

  it('a reset further away than maxParkMs ends the turn failed with quota_wall_too_long', async () => {
    const { actor, runner } = start([wall], policy({ maxParkMs: 30 * 60_000 }));
    await settle();
    expect(state(actor)).toBe('failed');
    expect(ctx(actor).turn).toMatchObject({ failureReason: 'quota_wall_too_long' });
    expect(ctx(actor).lastFailure).toMatchObject({ category: 'rate_limited', retryAfterMs: HOUR });
    expect(runner.requests).toHaveLength(1);
  });

  it('a Retry-After within maxRetryAfterMs is a normal (counted) backoff, not a wall', async () => {
    const { actor } = start(
      [{ kind: 'fail', category: 'rate_limited', retryAfterMs: 5000 }],
      policy({ maxAttempts: 2 }),
    );
    await settle();
    expect(state(actor)).toBe('backoff');
    expect(ctx(actor).turn!.attempts[0]!.quotaWall).toBeUndefined();
  });

  it('a cancel while parked ends the turn cancelled', async () => {
    const { actor } = start([wall], policy());
    await settle();
    actor.send({ type: 'session.cancel', reason: 'operator' });
    await settle();
    expect(state(actor)).toBe('cancelled');
    expect(ctx(actor).turn).toMatchObject({ status: 'cancelled', quotaWall: null });
  });

  it('restored from a snapshot, a parked session waits only for what remains until the reset', async () => {
    const { actor } = start([wall, { kind: 'complete' }], policy());
    await settle();
    const persisted = JSON.parse(JSON.stringify(persistSession(actor))) as ReturnType<typeof persistSession>;
    actor.stop();
    await vi.advanceTimersByTimeAsync(HOUR / 2);
    const runner = new FakeRunner([{ kind: 'complete' }]);
    const restored = startSessionActor(createSessionMachine(runner.run, runner.sink), { persisted });
    await settle();
    expect(state(restored)).toBe('parked');
    await vi.advanceTimersByTimeAsync(HOUR / 2 - 1);
    expect(runner.requests).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(1);
    await settle();
    expect(state(restored)).toBe('completed');
  });
});
