import { endTurn, decisionFor, failureOf, newTurn, now, patchLastAttempt, timeoutText } from './turn.ts';
import type { AttemptRecord, SessionContext, SessionEvent } from './types.ts';

/*
 * The context updates of the session machine's turn actions (session.machine.ts names each in
 * `setup({ actions })` as an `assign` of the function of the same name). Pure: the event and the
 * context in, the fields that change out.
 */

export function enqueuePrompt(context: SessionContext, event: SessionEvent): Partial<SessionContext> {
  if (event.type !== 'session.prompt') return {};
  const id = event.prompt.id;
  const known =
    context.mailbox.some((p) => p.id === id) || context.turn?.promptId === id || context.finishedPromptIds.includes(id);
  // The same prompt delivered twice (at-least-once delivery upstream) runs once.
  return known ? {} : { mailbox: [...context.mailbox, event.prompt] };
}

export function startNextTurn(context: SessionContext): Partial<SessionContext> {
  const next = context.mailbox[0];
  if (next === undefined) return {};
  return {
    mailbox: context.mailbox.slice(1),
    turnIndex: context.turnIndex + 1,
    attempt: 0,
    turn: newTurn(context.turnIndex + 1, next, context.turn),
    nextRetryAt: null,
    lastFailure: null,
  };
}

export function startAttempt(context: SessionContext): Partial<SessionContext> {
  if (context.turn === null) return {};
  const attempt = context.attempt + 1;
  const record: AttemptRecord = {
    attempt,
    startedAt: now(),
    endedAt: null,
    outcome: null,
    category: null,
    errorText: null,
    delayMs: null,
    promptRecorded: false,
  };
  return {
    attempt,
    nextRetryAt: null,
    turn: { ...context.turn, status: 'running', attempts: [...context.turn.attempts, record] },
  };
}

export function completeTurn(context: SessionContext): Partial<SessionContext> {
  if (context.turn === null) return {};
  const attempts = patchLastAttempt(context.turn, { endedAt: now(), outcome: 'completed', promptRecorded: true });
  return { agentSessionResumable: true, ...endTurn(context, 'completed', { attempts }) };
}

export function recordFailure(context: SessionContext, event: SessionEvent): Partial<SessionContext> {
  const failure = failureOf(event);
  if (context.turn === null || failure === null) return {};
  const decision = decisionFor(context, event);
  const outcome = event.type === 'session.restored' ? 'interrupted' : 'failed';
  const delayMs = decision?.retry === true ? decision.delayMs : null;
  const promptRecorded = failure.promptRecorded === true;
  const attempts = patchLastAttempt(context.turn, {
    endedAt: now(),
    outcome,
    category: failure.category,
    errorText: failure.text,
    delayMs,
    promptRecorded,
  });
  const agentSessionResumable = context.agentSessionResumable || promptRecorded;
  const lastFailure = {
    category: failure.category,
    errorText: failure.text,
    retryAfterMs: failure.retryAfterMs ?? null,
    at: now(),
  };
  if (decision?.retry === true && decision.wall !== undefined) {
    const { free } = decision.wall;
    const until = now() + decision.delayMs;
    const walled = patchLastAttempt({ ...context.turn, attempts }, { quotaWall: free ? 'free' : 'counted' });
    const quotaWall = { until, since: now(), free, category: failure.category };
    const freeWalls = (context.turn.freeWalls ?? 0) + (free ? 1 : 0);
    return {
      lastFailure,
      agentSessionResumable,
      nextRetryAt: until,
      turn: { ...context.turn, status: 'parked', attempts: walled, freeWalls, quotaWall },
    };
  }
  if (decision?.retry === true) {
    return {
      lastFailure,
      agentSessionResumable,
      nextRetryAt: now() + decision.delayMs,
      turn: { ...context.turn, status: 'backoff', attempts },
    };
  }
  const reason = decision?.retry === false ? decision.reason : 'not_retryable';
  return {
    lastFailure,
    agentSessionResumable,
    ...endTurn({ ...context, turn: { ...context.turn, attempts } }, 'failed', { failureReason: reason }),
  };
}

export function markCancelling(context: SessionContext, event: SessionEvent): Partial<SessionContext> {
  const reason = event.type === 'session.cancel' ? (event.reason ?? 'cancelled') : 'cancelled';
  if (context.turn === null) return {};
  return {
    turn: {
      ...context.turn,
      status: 'cancelling',
      cancelReason: reason,
      attempts: patchLastAttempt(context.turn, { endedAt: now(), outcome: 'cancelled' }),
    },
  };
}

/**
 * An attempt the machine stopped (the output of `attemptStopped`) that had recorded its prompt in the agent's
 * conversation leaves it resumable, as a failure with its prompt recorded does: the next turn goes on in it.
 */
export function recordStopped(context: SessionContext, output: unknown): Partial<SessionContext> {
  const recorded = (output as { promptRecorded?: unknown } | undefined)?.promptRecorded === true;
  return recorded && !context.agentSessionResumable ? { agentSessionResumable: true } : {};
}

export function cancelTurn(context: SessionContext, event: SessionEvent): Partial<SessionContext> {
  const reason =
    event.type === 'session.cancel' ? (event.reason ?? 'cancelled') : (context.turn?.cancelReason ?? 'cancelled');
  return endTurn(context, 'cancelled', { cancelReason: reason });
}

export function markTimedOut(context: SessionContext): Partial<SessionContext> {
  if (context.turn === null) return {};
  const attempts = patchLastAttempt(context.turn, {
    endedAt: now(),
    outcome: 'failed',
    category: 'timeout',
    errorText: timeoutText(context),
  });
  return { turn: { ...context.turn, status: 'cancelling', timedOut: true, attempts } };
}

export function failTimedOut(context: SessionContext): Partial<SessionContext> {
  if (context.turn === null) return {};
  const lastFailure = {
    category: 'timeout' as const,
    errorText: timeoutText(context),
    retryAfterMs: null,
    at: now(),
  };
  return { lastFailure, ...endTurn(context, 'failed', { failureReason: 'turn_timeout', timedOut: true }) };
}
