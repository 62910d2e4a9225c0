import { describe, expect, it, vi } from 'vitest';
import { createSessionMachine } from '../../machines/session.machine.ts';
import { persistSession, startSessionActor, type SessionActor, type Transition } from '../../machines/restore.ts';
import { CONTINUATION_PROMPT } from '../../machines/retry-request.ts';
import { FakeRunner, type Step } from './fake-runner.ts';
import { ctx, policy, settle, state, useFakeClock } from './harness.ts';

function start(steps: Step[], retryPolicy = policy()) {
  const runner = new FakeRunner(steps);
  const transitions: Transition[] = [];
  const machine = createSessionMachine(runner.run, runner.sink);
  const actor = startSessionActor(
    machine,
    { input: { sessionId: 's1', policy: retryPolicy } },
    { onTransition: (t) => transitions.push(t) },
  );
  return { runner, actor, machine, transitions };
}

function prompt(actor: SessionActor, id: string, text = `prompt ${id}`): void {
  actor.send({ type: 'session.prompt', prompt: { id, text } });
}

useFakeClock();

describe('session machine: one turn', () => {
  it('a turn that succeeds on the first attempt ends completed, with one attempt and the agent session id', async () => {
    const { actor, runner } = start([{ kind: 'complete' }]);
    prompt(actor, 'p1');
    await settle();
    expect(state(actor)).toBe('completed');
    const turn = ctx(actor).turn!;
    expect(turn.status).toBe('completed');
    expect(turn.attempts).toEqual([expect.objectContaining({ attempt: 1, outcome: 'completed', category: null })]);
    expect(ctx(actor).agentSessionId).toBe('agent-s1');
    expect(runner.messages.map((m) => m.message.type)).toEqual(['session.started', 'assistant', 'terminal.completed']);
  });

  it('a retryable failure waits the backoff, then the retry succeeds', async () => {
    const { actor, runner } = start([{ kind: 'fail', category: 'server_error' }, { kind: 'complete' }]);
    prompt(actor, 'p1');
    await settle();
    expect(state(actor)).toBe('backoff');
    expect(ctx(actor).nextRetryAt).toBe(Date.now() + 1000);
    await vi.advanceTimersByTimeAsync(999);
    expect(runner.requests).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    await settle();
    expect(state(actor)).toBe('completed');
    expect(runner.requests).toHaveLength(2);
    expect(ctx(actor).turn!.attempts.map((a) => [a.outcome, a.category, a.delayMs])).toEqual([
      ['failed', 'server_error', 1000],
      ['completed', null, null],
    ]);
  });

  it('attempts exhausted: the turn fails after maxAttempts with exponential delays', async () => {
    const { actor, runner } = start([{ kind: 'fail', category: 'network' }], policy({ maxAttempts: 3 }));
    prompt(actor, 'p1');
    await settle();
    await vi.advanceTimersByTimeAsync(1000);
    await settle();
    await vi.advanceTimersByTimeAsync(2000);
    await settle();
    expect(state(actor)).toBe('failed');
    expect(runner.requests).toHaveLength(3);
    const turn = ctx(actor).turn!;
    expect(turn.failureReason).toBe('attempts_exhausted');
    expect(turn.attempts.map((a) => a.delayMs)).toEqual([1000, 2000, null]);
    expect(ctx(actor).lastFailure).toMatchObject({ category: 'network' });
  });

  it('a non-retryable failure (auth) fails at once, whatever maxAttempts says', async () => {
    const { actor, runner } = start([{ kind: 'fail', category: 'auth' }], policy({ maxAttempts: 10 }));
    prompt(actor, 'p1');
    await settle();
    expect(state(actor)).toBe('failed');
    expect(ctx(actor).turn!.failureReason).toBe('not_retryable');
    expect(runner.requests).toHaveLength(1);
  });

  it('with retry disabled a retryable failure fails at once', async () => {
    const { actor, runner } = start([{ kind: 'fail', category: 'server_error' }], policy({ enabled: false }));
    prompt(actor, 'p1');
    await settle();
    expect(ctx(actor).turn!.failureReason).toBe('retry_disabled');
    expect(runner.requests).toHaveLength(1);
  });

  it('a Retry-After longer than the backoff decides the delay', async () => {
    const { actor, runner } = start([
      { kind: 'fail', category: 'rate_limited', retryAfterMs: 7000 },
      { kind: 'complete' },
    ]);
    prompt(actor, 'p1');
    await settle();
    expect(ctx(actor).turn!.attempts[0]!.delayMs).toBe(7000);
    await vi.advanceTimersByTimeAsync(6999);
    expect(runner.requests).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    await settle();
    expect(state(actor)).toBe('completed');
  });
  it('a runner that throws before its own end: the log and the machine both say the attempt failed, once', async () => {
    const { actor, runner } = start([{ kind: 'throw', message: 'agent state unreadable' }], policy({ enabled: false }));
    prompt(actor, 'p1');
    await settle();
    expect(state(actor)).toBe('failed');
    expect(ctx(actor).turn!.attempts).toEqual([
      expect.objectContaining({ outcome: 'failed', category: 'process_crash' }),
    ]);
    expect(runner.messages.map((m) => [m.message.type, m.meta.attempt])).toEqual([['terminal.failed', 1]]);
    expect(runner.messages[0]!.message.content).toMatchObject({ text: 'the provider threw: agent state unreadable' });
  });

  it('a runner that throws after its terminal: that terminal stays the only end of the attempt', async () => {
    const { actor, runner } = start(
      [{ kind: 'throw', message: 'cleanup failed', after: 'terminal' }],
      policy({ enabled: false }),
    );
    prompt(actor, 'p1');
    await settle();
    expect(state(actor)).toBe('failed');
    expect(ctx(actor).turn!.attempts).toEqual([
      expect.objectContaining({ outcome: 'failed', category: 'server_error' }),
    ]);
    expect(runner.messages.filter((m) => m.message.type.startsWith('terminal.'))).toHaveLength(1);
  });
});

describe('session machine: cancel', () => {
  it('cancel while running aborts the attempt and ends the turn cancelled only after the agent has stopped', async () => {
    const { actor, runner } = start([{ kind: 'hang', stopMs: 500 }]);
    prompt(actor, 'p1');
    await settle();
    expect(state(actor)).toBe('running');
    actor.send({ type: 'session.cancel', reason: 'user clicked stop' });
    await settle();
    expect(state(actor)).toBe('cancelling');
    expect(runner.stopsFinished).toBe(0);
    await vi.advanceTimersByTimeAsync(500);
    await settle();
    expect(runner.stopsFinished).toBe(1);
    expect(state(actor)).toBe('cancelled');
    expect(ctx(actor).turn).toMatchObject({ status: 'cancelled', cancelReason: 'user clicked stop' });
    // Output already emitted is kept.
    expect(runner.messages.map((m) => m.message.type)).toEqual(['session.started', 'assistant']);
  });

  it('cancel during backoff ends the turn cancelled and no retry runs', async () => {
    const { actor, runner } = start([{ kind: 'fail', category: 'server_error' }, { kind: 'complete' }]);
    prompt(actor, 'p1');
    await settle();
    expect(state(actor)).toBe('backoff');
    actor.send({ type: 'session.cancel' });
    await vi.advanceTimersByTimeAsync(10_000);
    expect(state(actor)).toBe('cancelled');
    expect(runner.requests).toHaveLength(1);
    expect(ctx(actor).nextRetryAt).toBeNull();
  });

  it('after a cancelled turn the session takes the next prompt', async () => {
    const { actor, runner } = start([{ kind: 'hang' }, { kind: 'complete' }]);
    prompt(actor, 'p1');
    await settle();
    actor.send({ type: 'session.cancel' });
    await settle();
    prompt(actor, 'p2');
    await settle();
    expect(state(actor)).toBe('completed');
    expect(ctx(actor).turnIndex).toBe(2);
    expect(runner.requests.map((r) => r.promptId)).toEqual(['p1', 'p2']);
  });
});

describe('session machine: mailbox', () => {
  it('prompts sent during a turn wait in order and never run concurrently', async () => {
    const { actor, runner } = start([{ kind: 'fail', category: 'server_error' }, { kind: 'complete' }]);
    prompt(actor, 'p1');
    prompt(actor, 'p2');
    prompt(actor, 'p3');
    await settle();
    expect(ctx(actor).mailbox.map((p) => p.id)).toEqual(['p2', 'p3']);
    await vi.advanceTimersByTimeAsync(1000);
    await settle();
    expect(state(actor)).toBe('completed');
    expect(runner.requests.map((r) => [r.turn, r.attempt, r.promptId])).toEqual([
      [1, 1, 'p1'],
      [1, 2, 'p1'],
      [2, 1, 'p2'],
      [3, 1, 'p3'],
    ]);
    expect(runner.maxConcurrent).toBe(1);
  });

  it('the same prompt id delivered twice runs once', async () => {
    const { actor, runner } = start([{ kind: 'complete' }]);
    prompt(actor, 'p1');
    prompt(actor, 'p1');
    await settle();
    prompt(actor, 'p1');
    await settle();
    expect(runner.requests).toHaveLength(1);
  });
});

describe('session machine: what a retry sends', () => {
  it('when the failed attempt recorded the prompt, the retry resumes the agent session with a continuation', async () => {
    const { actor, runner } = start([
      { kind: 'fail', category: 'network', afterText: 'Half an ans' },
      { kind: 'complete' },
    ]);
    prompt(actor, 'p1', 'Explain X');
    await settle();
    await vi.advanceTimersByTimeAsync(1000);
    await settle();
    expect(runner.requests[0]).toMatchObject({ text: 'Explain X', continuation: false, agentSessionId: null });
    expect(runner.requests[1]).toMatchObject({
      text: CONTINUATION_PROMPT,
      continuation: true,
      agentSessionId: 'agent-s1',
    });
  });

  it('when the failed attempt never reached the model, the retry sends the prompt again', async () => {
    const { actor, runner } = start([
      { kind: 'fail', category: 'process_crash', promptRecorded: false },
      { kind: 'complete' },
    ]);
    prompt(actor, 'p1', 'Explain X');
    await settle();
    await vi.advanceTimersByTimeAsync(1000);
    await settle();
    expect(runner.requests[1]).toMatchObject({ text: 'Explain X', continuation: false, agentSessionId: null });
  });

  it('the next turn resumes the agent session of the previous turns', async () => {
    const { actor, runner } = start([{ kind: 'complete' }]);
    prompt(actor, 'p1');
    prompt(actor, 'p2', 'second');
    await settle();
    expect(runner.requests[1]).toMatchObject({ text: 'second', continuation: false, agentSessionId: 'agent-s1' });
  });
});

describe('session machine: restore', () => {
  it('restored in backoff, it re-arms only the remaining delay', async () => {
    const first = start(
      [{ kind: 'fail', category: 'server_error' }, { kind: 'complete' }],
      policy({ initialDelayMs: 10_000, maxDelayMs: 10_000 }),
    );
    prompt(first.actor, 'p1');
    await settle();
    await vi.advanceTimersByTimeAsync(4000);
    const persisted = JSON.parse(JSON.stringify(persistSession(first.actor)));
    first.actor.stop();
    await vi.advanceTimersByTimeAsync(1000);

    const runner = new FakeRunner([{ kind: 'complete' }]);
    const actor = startSessionActor(createSessionMachine(runner.run, runner.sink), { persisted });
    expect(state(actor)).toBe('backoff');
    await vi.advanceTimersByTimeAsync(4999);
    expect(runner.requests).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(1);
    await settle();
    expect(runner.requests).toHaveLength(1);
    expect(state(actor)).toBe('completed');
  });

  it('restored in backoff after nextRetryAt has passed, the retry fires at once', async () => {
    const first = start([{ kind: 'fail', category: 'server_error' }]);
    prompt(first.actor, 'p1');
    await settle();
    const persisted = JSON.parse(JSON.stringify(persistSession(first.actor)));
    first.actor.stop();
    vi.setSystemTime(Date.now() + 60_000);
    const runner = new FakeRunner([{ kind: 'complete' }]);
    const actor = startSessionActor(createSessionMachine(runner.run, runner.sink), { persisted });
    await settle();
    expect(runner.requests).toHaveLength(1);
    expect(state(actor)).toBe('completed');
  });

  it('restored while an attempt ran, the attempt is recorded as interrupted and retried without backoff (no blind re-invoke)', async () => {
    const first = start([{ kind: 'hang' }]);
    prompt(first.actor, 'p1');
    await settle();
    const persisted = JSON.parse(JSON.stringify(persistSession(first.actor)));
    const runner = new FakeRunner([{ kind: 'complete' }]);
    const restored: Transition[] = [];
    const actor = startSessionActor(
      createSessionMachine(runner.run, runner.sink),
      { persisted },
      { onTransition: (t) => restored.push(t) },
    );
    // Through the retry decision (backoff), then the next attempt with no timer advanced.
    await settle();
    expect(restored.map((t) => t.to)).toEqual(['backoff', 'running', 'completed']);
    expect(ctx(actor).turn!.attempts[0]).toMatchObject({
      outcome: 'interrupted',
      category: 'process_crash',
      delayMs: 0,
    });
    expect(runner.requests.map((r) => r.attempt)).toEqual([2]);
    first.actor.stop();
  });

  it('interrupted attempts still count against maxAttempts: the last one ends the turn failed', async () => {
    const first = start([{ kind: 'hang' }], policy({ maxAttempts: 1 }));
    prompt(first.actor, 'p1');
    await settle();
    const persisted = JSON.parse(JSON.stringify(persistSession(first.actor)));
    first.actor.stop();
    const runner = new FakeRunner([{ kind: 'complete' }]);
    const actor = startSessionActor(createSessionMachine(runner.run, runner.sink), { persisted });
    await settle();
    expect(state(actor)).toBe('failed');
    expect(ctx(actor).turn!.failureReason).toBe('attempts_exhausted');
    expect(runner.requests).toHaveLength(0);
  });

  it('an interrupted attempt with retry disabled fails the turn', async () => {
    const first = start([{ kind: 'hang' }], policy({ enabled: false }));
    prompt(first.actor, 'p1');
    await settle();
    const persisted = JSON.parse(JSON.stringify(persistSession(first.actor)));
    first.actor.stop();
    const runner = new FakeRunner([{ kind: 'complete' }]);
    const actor = startSessionActor(createSessionMachine(runner.run, runner.sink), { persisted });
    expect(state(actor)).toBe('failed');
    expect(ctx(actor).turn!.failureReason).toBe('retry_disabled');
  });

  it('a snapshot of an unknown version is refused with a clear error', () => {
    const runner = new FakeRunner([]);
    expect(() =>
      startSessionActor(createSessionMachine(runner.run, runner.sink), {
        persisted: { version: 99, snapshot: { status: 'active', value: 'idle', context: {} } } as never,
      }),
    ).toThrow(/version 99/);
  });
});

describe('session machine: observability', () => {
  it('every transition is reported with a timestamp, from, to and event', async () => {
    const { actor, transitions } = start([{ kind: 'fail', category: 'server_error' }, { kind: 'complete' }]);
    prompt(actor, 'p1');
    await settle();
    await vi.advanceTimersByTimeAsync(1000);
    await settle();
    expect(transitions.map((t) => [t.from, t.to])).toEqual([
      ['none', 'idle'],
      ['idle', 'running'],
      ['running', 'backoff'],
      ['backoff', 'running'],
      ['running', 'completed'],
    ]);
    expect(transitions[1]).toMatchObject({ event: 'session.prompt', at: expect.any(Number) });
    expect(transitions[2]!.event).toBe('attempt.ended');
  });
});
