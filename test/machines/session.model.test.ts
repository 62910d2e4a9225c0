import { getSimplePaths } from '@xstate/graph';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createActor, fromCallback, fromPromise, type SnapshotFrom } from 'xstate';
import { sessionMachine } from '../../machines/session.machine.ts';
import { persistSession, startSessionActor } from '../../machines/restore.ts';
import type { SessionEvent } from '../../machines/types.ts';
import { parseRetryPolicy } from '../../src/retry/index.ts';

const parsed = parseRetryPolicy({ maxAttempts: 2, jitter: 'none' });
if (!parsed.ok) throw new Error('bad policy');
const policy = parsed.policy;

const failed = (category: 'server_error' | 'auth') =>
  ({
    type: 'attempt.ended',
    terminal: { type: 'terminal.failed', content: { text: category, category, stderr: '', invalid_output_lines: [] } },
  }) as const;

// Every kind of event the machine reacts to; the timer and the stop of a cancelled attempt are sent as the events XState would make.
const EVENTS = [
  { type: 'session.prompt', prompt: { id: 'p1', text: 'first' } },
  { type: 'session.prompt', prompt: { id: 'p2', text: 'second' } },
  { type: 'session.cancel' },
  { type: 'attempt.ended', terminal: { type: 'terminal.completed', content: { stopReason: 'stop' } } },
  failed('server_error'),
  failed('auth'),
  { type: 'xstate.after.retryDelay.session.backoff' },
  { type: 'xstate.done.actor.0.session.cancelling' },
] as unknown as SessionEvent[];

// The attempt never ends by itself here: the path decides when and how it ends.
const machine = sessionMachine.provide({
  actors: {
    attempt: fromCallback(() => () => undefined),
    attemptStopped: fromPromise(() => new Promise<{ promptRecorded: boolean }>(() => undefined)),
  },
});

type Snap = SnapshotFrom<typeof machine>;

const serialize = (s: Snap): string =>
  JSON.stringify([
    s.value,
    s.context.turnIndex,
    s.context.attempt,
    s.context.mailbox.map((m) => m.id),
    s.context.finishedPromptIds,
    s.context.turn?.status,
  ]);

const paths = getSimplePaths(machine, {
  events: EVENTS,
  input: { sessionId: 's', policy },
  serializeState: serialize as never,
});

function checkInvariants(s: Snap, sentPromptIds: Set<string>): void {
  const { context } = s;
  const turn = context.turn;
  const open = turn?.attempts.filter((a) => a.outcome === null) ?? [];
  // At most one attempt running, and one exactly while in `running`.
  expect(open.length).toBeLessThanOrEqual(1);
  expect(open.length === 1).toBe(s.value === 'running');
  // Attempts never exceed the policy.
  expect(turn?.attempts.length ?? 0).toBeLessThanOrEqual(policy.maxAttempts);
  // A turn that ended is in exactly one of completed / failed / cancelled, as is the machine.
  if (s.value === 'completed' || s.value === 'failed' || s.value === 'cancelled') {
    expect(turn?.status).toBe(s.value);
    expect(turn?.endedAt).not.toBeNull();
    expect(turn?.failureReason !== null).toBe(s.value === 'failed');
  }
  // No prompt lost or run twice: every prompt sent is exactly once finished, current or waiting.
  const current = turn !== null && turn.endedAt === null ? [turn.promptId] : [];
  const seen = [...context.finishedPromptIds, ...current, ...context.mailbox.map((p) => p.id)];
  expect(new Set(seen).size).toBe(seen.length);
  expect(new Set(seen)).toEqual(sentPromptIds);
}

beforeAll(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
});
afterAll(() => {
  vi.useRealTimers();
});

describe('session machine, model-based', () => {
  it('the traversal reaches every state of a turn', () => {
    const reached = new Set(paths.flatMap((p) => p.steps.map((step) => String(step.state.value))));
    expect(reached).toEqual(new Set(['idle', 'running', 'backoff', 'cancelling', 'completed', 'failed', 'cancelled']));
    expect(paths.length).toBeGreaterThan(100);
  });

  it('on every path, the invariants hold after each step, and a restore at any idle or backoff step behaves the same', () => {
    for (const path of paths) {
      const actor = createActor(machine, { input: { sessionId: 's', policy } }).start();
      const sent = new Set<string>();
      const events = path.steps.map((step) => step.event).filter((e) => (e.type as string) !== 'xstate.init');
      events.forEach((event, i) => {
        actor.send(event);
        if (event.type === 'session.prompt') sent.add(event.prompt.id);
        const snapshot = actor.getSnapshot();
        checkInvariants(snapshot, sent);

        if (snapshot.value === 'running' || snapshot.value === 'cancelling') return;
        const restored = startSessionActor(machine, { persisted: JSON.parse(JSON.stringify(persistSession(actor))) });
        expect(restored.getSnapshot().value).toBe(snapshot.value);
        expect(restored.getSnapshot().context).toEqual(snapshot.context);
        const twin = createActor(machine, {
          snapshot: actor.getPersistedSnapshot(),
          input: { sessionId: 's' },
        }).start();
        for (const next of events.slice(i + 1)) {
          restored.send(next);
          twin.send(next);
        }
        expect(restored.getSnapshot().value).toBe(twin.getSnapshot().value);
        expect(restored.getSnapshot().context).toEqual(twin.getSnapshot().context);
        restored.stop();
        twin.stop();
      });
      actor.stop();
    }
  });
});
