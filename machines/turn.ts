import type { TerminalMessage } from '../src/protocol/index.ts';
import { decideRetry, type RetryDecision } from '../src/retry/index.ts';
import { retryRequest } from './retry-request.ts';
import type {
  AttemptRecord,
  AttemptRequest,
  PromptInput,
  SessionContext,
  SessionEvent,
  TurnState,
  TurnStatus,
} from './types.ts';

/* What the session machine's actions compute on a turn: pure functions of its context and event. */

/** How many ended prompt ids the context remembers (to refuse a prompt id that already ran). */
export const FINISHED_PROMPTS_KEPT = 200;

type Failure = Extract<TerminalMessage, { type: 'terminal.failed' }>['content'];

export function now(): number {
  return Date.now();
}

export function newTurn(index: number, prompt: PromptInput, previous: TurnState | null = null): TurnState {
  // A retry of the failed turn just before this one carries what its last attempt left in the agent's session.
  const retried =
    prompt.retryOf !== undefined &&
    previous !== null &&
    previous.index === prompt.retryOf &&
    previous.status === 'failed'
      ? previous
      : null;
  return {
    ...(prompt.retryOf === undefined
      ? {}
      : { retryOf: { turn: prompt.retryOf, promptRecorded: retried?.attempts.at(-1)?.promptRecorded === true } }),
    index,
    promptId: prompt.id,
    text: prompt.text,
    options: prompt.options ?? {},
    status: 'running',
    failureReason: null,
    cancelReason: null,
    startedAt: now(),
    endedAt: null,
    attempts: [],
  };
}

export function patchLastAttempt(turn: TurnState, patch: Partial<AttemptRecord>): AttemptRecord[] {
  const attempts = turn.attempts.slice();
  const last = attempts.at(-1);
  if (last !== undefined) attempts[attempts.length - 1] = { ...last, ...patch };
  return attempts;
}

export function endTurn(
  context: SessionContext,
  status: TurnStatus,
  patch: Partial<TurnState> = {},
): Partial<SessionContext> {
  const turn = context.turn;
  if (turn === null) return {};
  const kept = context.finishedPromptIds;
  const finished =
    kept.length < FINISHED_PROMPTS_KEPT
      ? [...kept, turn.promptId]
      : [...kept.slice(kept.length - FINISHED_PROMPTS_KEPT + 1), turn.promptId];
  // A turn ended while parked (cancelled, timed out) is no longer behind its wall.
  const wall = turn.quotaWall === undefined || turn.quotaWall === null ? {} : { quotaWall: null };
  return {
    turn: { ...turn, ...wall, ...patch, status, endedAt: now() },
    nextRetryAt: null,
    finishedPromptIds: finished,
  };
}

/** Why an attempt whose worker stopped or crashed while it ran failed (its record, and the log's terminal.failed). */
export const INTERRUPTED_TEXT = 'the attempt was interrupted (its worker stopped or crashed)';

/** The failure of the attempt that just ended, from its terminal message or from an interruption. */
export function failureOf(event: SessionEvent): Failure | null {
  if (event.type === 'attempt.ended') return event.terminal.type === 'terminal.failed' ? event.terminal.content : null;
  if (event.type === 'session.restored') {
    return {
      text: INTERRUPTED_TEXT,
      category: 'process_crash',
      stderr: '',
      invalid_output_lines: [],
    };
  }
  return null;
}

/** When the current turn must end (its start + the policy's `maxTurnMs`), or null without a limit. */
export function turnDeadline(context: Pick<SessionContext, 'turn' | 'policy'>): number | null {
  const limit = context.policy.maxTurnMs ?? 0;
  if (context.turn === null || limit <= 0) return null;
  return context.turn.startedAt + limit;
}

export function timeoutText(context: SessionContext): string {
  return `the turn reached its wall-clock limit (maxTurnMs ${context.policy.maxTurnMs ?? 0} ms)`;
}

export function decisionFor(context: SessionContext, event: SessionEvent): RetryDecision | null {
  const failure = failureOf(event);
  if (failure === null) return null;
  // Attempts that ended on a free quota wall do not count against maxAttempts.
  const free = context.turn?.freeWalls ?? 0;
  const decision = decideRetry(context.policy, failure, Math.max(1, context.attempt - free), Math.random, free);
  // An attempt interrupted by its worker (dead, cut off, shut down) says nothing about the agent or its
  // provider, so no backoff: the takeover already waited for the lease to lapse. It still counts against
  // maxAttempts, so a session whose attempts keep killing their workers ends failed.
  return event.type === 'session.restored' && decision.retry ? { ...decision, delayMs: 0 } : decision;
}

/** What the attempt about to run is asked to do. */
export function attemptRequest(context: SessionContext): AttemptRequest {
  const turn = context.turn;
  if (turn === null) throw new Error('running without a turn');
  // The attempt before this one: of this turn, or for an operator's retry, the failed turn's last.
  const previous = turn.attempts.at(-2) ?? turn.retryOf ?? null;
  const resumable = context.agentSessionResumable ? context.agentSessionId : null;
  const { text, continuation } = retryRequest(turn.text, previous ?? null, resumable);
  return {
    sessionId: context.sessionId,
    turn: turn.index,
    attempt: context.attempt,
    promptId: turn.promptId,
    text,
    continuation,
    agentSessionId: resumable,
    options: turn.options,
  };
}

/** The turn options of the attempt the machine is about to start: a retry's turn, else the next prompt's. */
export function nextAttemptOptions(context: SessionContext): Readonly<Record<string, unknown>> {
  if (
    context.turn !== null &&
    (context.turn.status === 'backoff' || context.turn.status === 'parked' || context.turn.status === 'running')
  )
    return context.turn.options;
  return context.mailbox[0]?.options ?? {};
}
