import { describe, expect, it, vi } from 'vitest';
import { createSessionMachine } from '../../machines/session.machine.ts';
import { startSessionActor } from '../../machines/restore.ts';
import { CONTINUATION_PROMPT } from '../../machines/retry-request.ts';
import type { RetryPolicy } from '../../src/index.ts';
import { FakeRunner, type Step } from './fake-runner.ts';
import { ctx, policy, settle, useFakeClock } from './harness.ts';

function start(steps: Step[], retryPolicy: RetryPolicy) {
  const runner = new FakeRunner(steps);
  const actor = startSessionActor(createSessionMachine(runner.run, runner.sink), {
    input: { sessionId: 's1', policy: retryPolicy },
  });
  return { runner, actor };
}

useFakeClock();

describe('session machine: an operator retry of a failed turn', () => {
  it('runs as a new turn with a fresh series of attempts; the agent session that recorded the prompt is continued, not sent the prompt again', async () => {
    const { actor, runner } = start(
      [
        { kind: 'fail', category: 'server_error', promptRecorded: true },
        { kind: 'fail', category: 'server_error' },
        { kind: 'complete' },
      ],
      policy({ maxAttempts: 2 }),
    );
    actor.send({ type: 'session.prompt', prompt: { id: 'p1', text: 'Explain retries' } });
    await settle();
    await vi.advanceTimersByTimeAsync(1000);
    await settle();
    expect(ctx(actor).turn).toMatchObject({ index: 1, status: 'failed', failureReason: 'attempts_exhausted' });

    actor.send({ type: 'session.prompt', prompt: { id: 'r1', text: 'Explain retries', retryOf: 1 } });
    await settle();
    expect(ctx(actor).turn).toMatchObject({
      index: 2,
      status: 'completed',
      retryOf: { turn: 1, promptRecorded: true },
    });
    expect(ctx(actor).turn!.attempts.map((a) => a.attempt)).toEqual([1]);
    const request = runner.requests.at(-1)!;
    expect(request).toMatchObject({
      turn: 2,
      attempt: 1,
      continuation: true,
      text: CONTINUATION_PROMPT,
      agentSessionId: 'agent-s1',
    });
  });

  it('when the failed attempt had not recorded the prompt, the retry sends the prompt itself', async () => {
    const { actor, runner } = start(
      [{ kind: 'fail', category: 'auth', promptRecorded: false }, { kind: 'complete' }],
      policy(),
    );
    actor.send({ type: 'session.prompt', prompt: { id: 'p1', text: 'Hello' } });
    await settle();
    expect(ctx(actor).turn!.status).toBe('failed');
    actor.send({ type: 'session.prompt', prompt: { id: 'r1', text: 'Hello', retryOf: 1 } });
    await settle();
    expect(runner.requests.at(-1)).toMatchObject({ turn: 2, continuation: false, text: 'Hello' });
    expect(ctx(actor).turn).toMatchObject({ status: 'completed', retryOf: { turn: 1, promptRecorded: false } });
  });
});
