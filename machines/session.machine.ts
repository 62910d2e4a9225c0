import { and, assign, enqueueActions, setup } from 'xstate';
import { DEFAULT_RETRY_POLICY } from '../src/retry/index.ts';
import { createAttemptActors } from './attempt-actor.ts';
import { attemptRequest, decisionFor, now, patchLastAttempt, turnDeadline } from './turn.ts';
import {
  cancelTurn,
  completeTurn,
  enqueuePrompt,
  failTimedOut,
  markCancelling,
  markTimedOut,
  recordFailure,
  recordStopped,
  startAttempt,
  startNextTurn,
} from './turn-updates.ts';
import type {
  AttemptRequest,
  AttemptRunner,
  MessageSink,
  SessionContext,
  SessionEvent,
  SessionInput,
} from './types.ts';

/** The id of the delayed `turn.deadline` event, so that it can be cancelled and armed again. */
const DEADLINE_ID = 'turnDeadline';

const unconfigured = createAttemptActors(
  () => {
    throw new Error('no attempt runner configured: provide one with createSessionMachine() or .provide()');
  },
  () => undefined,
);

export const sessionMachine = setup({
  types: {
    context: {} as SessionContext,
    events: {} as SessionEvent,
    input: {} as SessionInput,
  },
  actors: {
    attempt: unconfigured.attempt,
    attemptStopped: unconfigured.attemptStopped,
  },
  guards: {
    hasMail: ({ context }) => context.mailbox.length > 0,
    attemptCompleted: ({ event }) => event.type === 'attempt.ended' && event.terminal.type === 'terminal.completed',
    willRetry: ({ context, event }) => decisionFor(context, event)?.retry === true,
    /** The failure is a quota wall the policy parks for (its reset within maxParkMs). */
    quotaWall: ({ context, event }) => {
      const decision = decisionFor(context, event);
      return decision?.retry === true && decision.wall !== undefined;
    },
    /**
     * The attempt about to start must first be admitted by the runtime (a fleet limit, a cooldown or
     * paused dispatch applies to it): it goes to `waiting` until `session.capacity`. Provided by the
     * runtime (see SharedSessionMachine); by default nothing is gated.
     */
    admissionRequired: () => false,
    deadlinePassed: ({ context }) => {
      const deadline = turnDeadline(context);
      return deadline !== null && now() >= deadline;
    },
    timedOut: ({ context }) => context.turn?.timedOut === true,
  },
  delays: {
    retryDelay: ({ context }) => Math.max(0, (context.nextRetryAt ?? 0) - now()),
  },
  actions: {
    enqueuePrompt: assign(({ context, event }) => enqueuePrompt(context, event)),
    unqueuePrompt: assign(({ context, event }) => {
      if (event.type !== 'session.unqueue' || !context.mailbox.some((p) => p.id === event.promptId)) return {};
      return { mailbox: context.mailbox.filter((p) => p.id !== event.promptId) };
    }),
    startNextTurn: assign(({ context }) => startNextTurn(context)),
    startAttempt: assign(({ context }) => startAttempt(context)),
    recordAgentSession: assign(({ event }) =>
      event.type === 'attempt.session' ? { agentSessionId: event.agentSessionId } : {},
    ),
    recordSandbox: assign(({ context, event }) => {
      if (event.type !== 'attempt.spawned' || context.turn === null) return {};
      return { turn: { ...context.turn, attempts: patchLastAttempt(context.turn, { sandbox: event.sandbox }) } };
    }),
    completeTurn: assign(({ context }) => completeTurn(context)),
    recordFailure: assign(({ context, event }) => recordFailure(context, event)),
    markCancelling: assign(({ context, event }) => markCancelling(context, event)),
    cancelTurn: assign(({ context, event }) => cancelTurn(context, event)),
    /** The stopped attempt's output (attemptStopped): its prompt recorded in the agent's conversation, that is resumable. */
    recordStopped: assign(({ context, event }) => recordStopped(context, (event as { output?: unknown }).output)),
    /** The wall-clock limit hit while an attempt runs: stop it (three-stage stop) as for a cancel, but the turn will end `failed`. */
    markTimedOut: assign(({ context }) => markTimedOut(context)),
    /** Ends a turn stopped by its wall-clock limit: `failed`, category `timeout`, whatever the retry policy says. */
    failTimedOut: assign(({ context }) => failTimedOut(context)),
    /** (Re)arms the turn's wall-clock limit; a turn without one gets no timer at all. */
    armDeadline: enqueueActions(({ context, enqueue }) => {
      enqueue.cancel(DEADLINE_ID);
      const deadline = turnDeadline(context);
      if (deadline !== null)
        enqueue.raise({ type: 'turn.deadline' }, { id: DEADLINE_ID, delay: Math.max(0, deadline - now()) });
    }),
    disarmDeadline: enqueueActions(({ enqueue }) => enqueue.cancel(DEADLINE_ID)),
    setPolicy: assign(({ event }) => (event.type === 'session.policy' ? { policy: event.policy } : {})),
    setWaiting: assign(({ event }) => (event.type === 'session.waiting' ? { waitingFor: event.waitingFor } : {})),
    clearWaiting: assign(() => ({ waitingFor: null })),
    /** Leaves a quota wall (at its reset, or resumed by an operator): the turn runs on. */
    leaveWall: assign(({ context }) =>
      context.turn === null ? {} : { nextRetryAt: null, turn: { ...context.turn, status: 'running', quotaWall: null } },
    ),
  },
}).createMachine({
  id: 'session',
  context: ({ input }) => ({
    sessionId: input.sessionId,
    agentSessionId: null,
    agentSessionResumable: false,
    policy: input.policy ?? DEFAULT_RETRY_POLICY,
    turnIndex: 0,
    attempt: 0,
    turn: null,
    nextRetryAt: null,
    lastFailure: null,
    mailbox: [],
    finishedPromptIds: [],
    waitingFor: null,
  }),
  initial: 'idle',
  on: {
    'session.prompt': { actions: 'enqueuePrompt' },
    'session.policy': { actions: 'setPolicy' },
    'session.unqueue': { actions: 'unqueuePrompt' },
  },
  states: {
    idle: {
      always: [
        { guard: and(['hasMail', 'admissionRequired']), target: 'waiting', actions: 'startNextTurn' },
        { guard: 'hasMail', target: 'running', actions: 'startNextTurn' },
      ],
    },
    running: {
      entry: ['startAttempt', 'armDeadline'],
      exit: 'disarmDeadline',
      invoke: {
        id: 'attempt',
        src: 'attempt',
        input: ({ context }): AttemptRequest => attemptRequest(context),
      },
      on: {
        'attempt.session': { actions: 'recordAgentSession' },
        'attempt.spawned': { actions: 'recordSandbox' },
        'attempt.ended': [
          { guard: 'attemptCompleted', target: 'completed', actions: 'completeTurn' },
          { guard: 'quotaWall', target: 'parked', actions: 'recordFailure' },
          { guard: 'willRetry', target: 'backoff', actions: 'recordFailure' },
          { target: 'failed', actions: 'recordFailure' },
        ],
        'session.cancel': { target: 'cancelling', actions: 'markCancelling' },
        'turn.deadline': { guard: 'deadlinePassed', target: 'cancelling', actions: 'markTimedOut' },
        // A new limit applies to the running turn at once.
        'session.policy': { actions: ['setPolicy', 'armDeadline'] },
      },
    },
    backoff: {
      entry: 'armDeadline',
      exit: 'disarmDeadline',
      after: {
        retryDelay: [
          { guard: 'deadlinePassed', target: 'failed', actions: 'failTimedOut' },
          { guard: 'admissionRequired', target: 'waiting' },
          { target: 'running' },
        ],
      },
      on: {
        'turn.deadline': { guard: 'deadlinePassed', target: 'failed', actions: 'failTimedOut' },
        'session.policy': { actions: ['setPolicy', 'armDeadline'] },
        'session.cancel': { target: 'cancelled', actions: 'cancelTurn' },
        // After a restore: XState keeps no timers in a snapshot, so re-arm what remains of the delay.
        'session.restored': { target: 'backoff', reenter: true },
      },
    },
    /**
     * At a quota wall: a rate limit whose reset lies past the normal backoff. No attempt runs until the
     * reset (or an operator's `session.resume`); the holder parks the session meanwhile, as for a long backoff.
     */
    parked: {
      entry: 'armDeadline',
      exit: 'disarmDeadline',
      after: {
        retryDelay: [
          { guard: 'deadlinePassed', target: 'failed', actions: 'failTimedOut' },
          { guard: 'admissionRequired', target: 'waiting', actions: 'leaveWall' },
          { target: 'running', actions: 'leaveWall' },
        ],
      },
      on: {
        'session.resume': [
          { guard: 'admissionRequired', target: 'waiting', actions: 'leaveWall' },
          { target: 'running', actions: 'leaveWall' },
        ],
        'turn.deadline': { guard: 'deadlinePassed', target: 'failed', actions: 'failTimedOut' },
        'session.policy': { actions: ['setPolicy', 'armDeadline'] },
        'session.cancel': { target: 'cancelled', actions: 'cancelTurn' },
        'session.restored': { target: 'parked', reenter: true },
      },
    },
    /**
     * The next attempt waits for the runtime's admission (a fleet limit's capacity, a cooldown, paused
     * dispatch); no attempt runs and none is counted. The holder parks the session meanwhile.
     */
    waiting: {
      // The turn's wall-clock limit runs on while it waits for capacity.
      entry: 'armDeadline',
      exit: 'disarmDeadline',
      on: {
        'turn.deadline': { guard: 'deadlinePassed', target: 'failed', actions: ['clearWaiting', 'failTimedOut'] },
        'session.policy': { actions: ['setPolicy', 'armDeadline'] },
        'session.capacity': { target: 'running', actions: 'clearWaiting' },
        'session.waiting': { actions: 'setWaiting' },
        'session.cancel': { target: 'cancelled', actions: ['clearWaiting', 'cancelTurn'] },
      },
    },
    cancelling: {
      invoke: {
        src: 'attemptStopped',
        input: ({ context }) => ({ sessionId: context.sessionId, turn: context.turnIndex, attempt: context.attempt }),
        onDone: [
          { guard: 'timedOut', target: 'failed', actions: ['recordStopped', 'failTimedOut'] },
          { target: 'cancelled', actions: ['recordStopped', 'cancelTurn'] },
        ],
        onError: [
          { guard: 'timedOut', target: 'failed', actions: 'failTimedOut' },
          { target: 'cancelled', actions: 'cancelTurn' },
        ],
      },
    },
    /** Only entered by restoring a snapshot taken while an attempt ran: that attempt was interrupted. */
    interrupted: {
      on: {
        'session.restored': [
          { guard: 'willRetry', target: 'backoff', actions: 'recordFailure' },
          { target: 'failed', actions: 'recordFailure' },
        ],
      },
    },
    /** Only entered by restoring a snapshot taken while a cancel waited for the agent to stop. */
    cancelInterrupted: {
      on: {
        'session.restored': [
          { guard: 'timedOut', target: 'failed', actions: 'failTimedOut' },
          { target: 'cancelled', actions: 'cancelTurn' },
        ],
      },
    },
    completed: {
      always: [
        { guard: and(['hasMail', 'admissionRequired']), target: 'waiting', actions: 'startNextTurn' },
        { guard: 'hasMail', target: 'running', actions: 'startNextTurn' },
      ],
    },
    failed: {
      always: [
        { guard: and(['hasMail', 'admissionRequired']), target: 'waiting', actions: 'startNextTurn' },
        { guard: 'hasMail', target: 'running', actions: 'startNextTurn' },
      ],
    },
    cancelled: {
      always: [
        { guard: and(['hasMail', 'admissionRequired']), target: 'waiting', actions: 'startNextTurn' },
        { guard: 'hasMail', target: 'running', actions: 'startNextTurn' },
      ],
    },
  },
});

export type SessionMachine = typeof sessionMachine;

/** The session machine with a real attempt runner and message sink. */
export function createSessionMachine(runner: AttemptRunner, sink: MessageSink): SessionMachine {
  return withAttemptActors(createAttemptActors(runner, sink));
}

/** The session machine with attempt actors the caller built (e.g. one set shared by many sessions). */
export function withAttemptActors(actors: ReturnType<typeof createAttemptActors>): SessionMachine {
  return sessionMachine.provide({ actors: { attempt: actors.attempt, attemptStopped: actors.attemptStopped } });
}
