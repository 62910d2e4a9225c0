import { describe, expect, it, vi } from 'vitest';
import { createSessionMachine } from '../../machines/session.machine.ts';
import { turnDeadline } from '../../machines/turn.ts';
import { persistSession, startSessionActor } from '../../machines/restore.ts';
import type { RetryPolicy } from '../../src/index.ts';
import { FakeRunner, type Step } from './fake-runner.ts';
import { ctx, policy, settle, state, useFakeClock } from './harness.ts';

function start(steps: Step[], retryPolicy: RetryPolicy) {
  const runner = new FakeRunner(steps);
  const machine = createSessionMachine(runner.run, runner.sink);
  const actor = startSessionActor(machine, { input: { sessionId: 's1', policy: retryPolicy } });
  return { runner, actor, machine };
}

useFakeClock();

describe('session machine: maxTurnMs', () => {
  it('a running attempt past the limit is stopped like a cancel, then the turn ends failed with category timeout', async () => {
    const { actor, runner } = start([{ kind: 'hang', stopMs: 300 }], policy({ maxTurnMs: 5000 }));
    actor.send({ type: 'session.prompt', prompt: { id: 'p1', text: 'long' } });
    await settle();
    await vi.advanceTimersByTimeAsync(4999);
    expect(state(actor)).toBe('running');
    await vi.advanceTimersByTimeAsync(1);
    await settle();
    // Stopping: the turn is not over before the agent is gone.
    expect(state(actor)).toBe('cancelling');
    expect(runner.stopsFinished).toBe(0);
    await vi.advanceTimersByTimeAsync(300);
    await settle();
    expect(runner.stopsFinished).toBe(1);
    expect(state(actor)).toBe('failed');
    const turn = ctx(actor).turn!;
    expect(turn).toMatchObject({ status: 'failed', failureReason: 'turn_timeout', timedOut: true });
    expect(turn.attempts.map((a) => [a.outcome, a.category])).toEqual([['failed', 'timeout']]);
    expect(ctx(actor).lastFailure).toMatchObject({ category: 'timeout' });
    // Never retried, although timeout is a retryable category.
    expect(runner.requests).toHaveLength(1);
  });

  it('the limit counts the whole turn: it fires during a backoff and no further attempt starts', async () => {
    const { actor, runner } = start(
      [{ kind: 'fail', category: 'server_error' }],
      policy({ maxTurnMs: 2500, initialDelayMs: 2000, maxAttempts: 10 }),
    );
    actor.send({ type: 'session.prompt', prompt: { id: 'p1', text: 'x' } });
    await settle();
    await vi.advanceTimersByTimeAsync(2000);
    await settle();
    expect(runner.requests).toHaveLength(2);
    expect(state(actor)).toBe('backoff');
    await vi.advanceTimersByTimeAsync(500);
    await settle();
    expect(state(actor)).toBe('failed');
    expect(ctx(actor).turn!.failureReason).toBe('turn_timeout');
    await vi.advanceTimersByTimeAsync(60_000);
    expect(runner.requests).toHaveLength(2);
  });

  it('a cancel while the limit stops the attempt still ends the turn failed (timeout)', async () => {
    const { actor } = start([{ kind: 'hang', stopMs: 100 }], policy({ maxTurnMs: 1000 }));
    actor.send({ type: 'session.prompt', prompt: { id: 'p1', text: 'x' } });
    await settle();
    await vi.advanceTimersByTimeAsync(1000);
    await settle();
    actor.send({ type: 'session.cancel', reason: 'late' });
    await vi.advanceTimersByTimeAsync(100);
    await settle();
    expect(ctx(actor).turn).toMatchObject({ status: 'failed', failureReason: 'turn_timeout' });
  });

  it('restored while stopping at the limit, the turn ends failed, not cancelled', async () => {
    const first = start([{ kind: 'hang', stopMs: 10_000 }], policy({ maxTurnMs: 1000 }));
    first.actor.send({ type: 'session.prompt', prompt: { id: 'p1', text: 'x' } });
    await settle();
    await vi.advanceTimersByTimeAsync(1000);
    await settle();
    expect(state(first.actor)).toBe('cancelling');
    const persisted = persistSession(first.actor);
    first.actor.stop();
    const again = startSessionActor(first.machine, { persisted });
    await settle();
    expect(ctx(again).turn).toMatchObject({ status: 'failed', failureReason: 'turn_timeout' });
  });

  it('restored in a backoff after the deadline passed, the turn fails at once without another attempt', async () => {
    const first = start(
      [{ kind: 'fail', category: 'network' }],
      policy({ maxTurnMs: 30_000, initialDelayMs: 20_000, maxDelayMs: 60_000 }),
    );
    first.actor.send({ type: 'session.prompt', prompt: { id: 'p1', text: 'x' } });
    await settle();
    const persisted = persistSession(first.actor);
    first.actor.stop();
    vi.setSystemTime(Date.now() + 40_000);
    const again = startSessionActor(first.machine, { persisted });
    await settle();
    expect(ctx(again).turn).toMatchObject({ status: 'failed', failureReason: 'turn_timeout' });
    expect(first.runner.requests).toHaveLength(1);
  });

  it('a limit set while the turn runs applies to it at once (counted from the turn start)', async () => {
    const { actor } = start([{ kind: 'hang' }], policy());
    actor.send({ type: 'session.prompt', prompt: { id: 'p1', text: 'x' } });
    await settle();
    await vi.advanceTimersByTimeAsync(10_000);
    actor.send({ type: 'session.policy', policy: policy({ maxTurnMs: 4000 }) });
    await settle();
    expect(state(actor)).toBe('cancelling');
    await vi.advanceTimersByTimeAsync(1);
    await settle();
    expect(ctx(actor).turn).toMatchObject({ status: 'failed', failureReason: 'turn_timeout' });
  });

  it('without a limit nothing changes: a hanging attempt keeps running', async () => {
    const { actor } = start([{ kind: 'hang' }], policy());
    actor.send({ type: 'session.prompt', prompt: { id: 'p1', text: 'x' } });
    await settle();
    expect(turnDeadline(ctx(actor))).toBeNull();
    await vi.advanceTimersByTimeAsync(7 * 86_400_000);
    expect(state(actor)).toBe('running');
  });
});
