import { eventLabel } from '../../machines/event-labels.ts';
import { isSettledState } from '../../machines/states.ts';
import type { AttemptOutcome, TurnFailureReason } from '../../machines/types.ts';
import type { FailureCategory } from '../protocol/index.ts';
import type { RetryPolicy } from '../retry/index.ts';
import type { SessionState } from '../api/types.ts';
import type { SessionRecord } from './caller/types.ts';
import type { TurnPrompt } from './turn-prompts.ts';
import type { UsageTotals } from './usage/usage.ts';
import { scheduleOfPrompt } from './schedules/prompt-id.ts';

export type TurnStatusView = 'queued' | 'running' | 'backoff' | 'parked' | 'completed' | 'failed' | 'cancelled';

/**
 * A session as `sessiond inspect --json` prints it, `GET /api/sessions/{id}` starts with and the library's
 * `inspect()` returns: its state, the latest turn (`queued` while its prompt waits) with its attempts, the
 * transition history, approvals, usage. One type for every surface.
 */
export interface SessionView {
  sessionId: string;
  state: SessionState;
  agent: string;
  createdAt: number;
  updatedAt: number;
  agentSessionId: string | null;
  turn: {
    index: number;
    status: TurnStatusView;
    prompt: string | null;
    /** The schedule whose firing (for the tick `tick`, epoch ms) enqueued this turn's prompt (docs/schedules.md). */
    schedule?: { id: string; tick: number };
    failureReason?: TurnFailureReason;
    cancelReason?: string;
    attempts: Array<{
      attempt: number;
      /** null while it runs. */
      outcome: AttemptOutcome | null;
      category?: FailureCategory;
      errorText?: string;
      delayMs?: number;
      /** It ended on a quota wall; `free`: not counted against maxAttempts. */
      quotaWall?: 'free' | 'counted';
      /** How the attempt's agent was confined (bwrap, landlock, none); absent until its process runs. */
      sandbox?: 'bwrap' | 'landlock' | 'none';
      startedAt: number;
      endedAt: number | null;
      /** The tokens this attempt's terminal message reported. */
      usage?: UsageTotals;
    }>;
    /** The tokens this turn's attempts reported, summed. */
    usage?: UsageTotals;
    /** Attempts counted against the policy's maxAttempts (those that hit a free quota wall are not). */
    attemptsCounted: number;
  } | null;
  /** The tokens the session's attempts reported, summed, in all and per agent and model (absent: none reported). */
  usage?: { total: UsageTotals; byModel: Array<{ agent: string; model: string; usage: UsageTotals }> };
  nextRetryAt?: number;
  /**
   * In `waiting`: the fleet limit the next attempt waits for, why (full, rate, tokens, cooldown, paused),
   * since and until when at the latest; or (`reason: "agent"`, `limit` `agent:<name>`) the agent it
   * waits for a worker offering.
   */
  waitingFor?: { limit: string; reason: string; agent?: string; since: number; until: number };
  /** In `parked`: the quota wall — the provider's reset (the next attempt starts then, or on an operator's resume), since when, and whether the attempt that hit it was free. */
  parkedUntil?: { until: number; since: number; free: boolean };
  lastFailure?: { category: FailureCategory; errorText: string; at: number };
  /** The retry policy the session runs under (its own override, else the one its turn took); null before its first turn. */
  policy: RetryPolicy | null;
  policySource: 'session' | 'global';
  queuedPrompts: number;
  /** Steers (whenBusy "steer") accepted for the running turn and not delivered yet, oldest first (`id`: the promptId). */
  steers: Array<{ id: string; text: string; acceptedAt: number }>;
  /** `event`: the machine's own name (`xstate.after…`, `session.cancel`); `label`: the same in words. */
  history: Array<{ at: number; from: string; to: string; event: string; label: string; prompt?: TurnPrompt }>;
  lastSeq: number;
  heldBy: string | null;
  /** Permission requests of the running turn not yet given to the agent: the session is awaiting approval while one has no decision. */
  approvals: ApprovalSummary[];
  /** The session's own webhook URL (`webhook` of enqueue); never its secret. Absent: none. */
  webhook?: string;
}

/** The name sessiond's own code has used for SessionView. */
export type SessionSummary = SessionView;

export interface ApprovalSummary {
  requestId: string;
  tool: string;
  kind?: string;
  arguments: unknown;
  options: Array<{ optionId: string; name: string; kind: string }>;
  requestedAt: number;
  deadlineAt: number;
  /** Decided while no worker held the session: given to the agent when it asks again. */
  decision?: { outcome: 'allowed' | 'denied'; optionId: string | null; by: string; at: number };
}

/** The session waits for an operator: a request of its running turn has no decision. */
export function awaitingApproval(summary: SessionSummary): boolean {
  return summary.approvals.some((a) => a.decision === undefined);
}

/**
 * The operator's view of a session (`inspect`, the HTTP API, the dashboard):
 * the latest turn — `queued` when its prompt has not been taken yet — with its
 * attempts, and the transition history.
 */
export function summarize(view: SessionRecord): SessionView {
  const context = view.context;
  const taken = context?.turnIndex ?? 0;
  const turn = context?.turn ?? null;
  let turnView: SessionSummary['turn'] = null;
  if (view.queued.length > 0 && (turn === null || isSettledState(turn.status))) {
    const next = view.queued.at(-1);
    turnView = {
      index: taken + (context?.mailbox.length ?? 0) + view.queued.length,
      status: 'queued',
      prompt: next?.text ?? null,
      ...scheduleField(next?.id),
      attempts: [],
      attemptsCounted: 0,
    };
  } else if (turn !== null) {
    const status: TurnStatusView = turn.status === 'cancelling' ? 'running' : turn.status;
    const turnUsage = view.usage?.turn?.index === turn.index ? view.usage.turn : null;
    turnView = {
      index: turn.index,
      status,
      prompt: turn.text,
      ...scheduleField(turn.promptId),
      ...(turn.failureReason === null ? {} : { failureReason: turn.failureReason }),
      ...(turn.cancelReason === null || status !== 'cancelled' ? {} : { cancelReason: turn.cancelReason }),
      attempts: turn.attempts.map((a) => ({
        attempt: a.attempt,
        outcome: a.outcome,
        ...(a.category === null ? {} : { category: a.category }),
        ...(a.errorText === null ? {} : { errorText: a.errorText }),
        ...(a.delayMs === null ? {} : { delayMs: a.delayMs }),
        ...(a.quotaWall === undefined ? {} : { quotaWall: a.quotaWall }),
        ...(a.sandbox === undefined ? {} : { sandbox: a.sandbox }),
        startedAt: a.startedAt,
        endedAt: a.endedAt,
        ...usageOf(turnUsage?.attempts.find((u) => u.attempt === a.attempt)?.usage),
      })),
      ...usageOf(turnUsage?.total),
      attemptsCounted: turn.attempts.length - (turn.freeWalls ?? 0),
    };
  }
  return {
    sessionId: view.sessionId,
    state: view.state as SessionState,
    agent: view.agent,
    createdAt: view.createdAt,
    updatedAt: view.updatedAt,
    agentSessionId: context?.agentSessionId ?? null,
    turn: turnView,
    ...(context?.nextRetryAt == null ? {} : { nextRetryAt: context.nextRetryAt }),
    ...(context?.waitingFor == null || view.state !== 'waiting' ? {} : { waitingFor: context.waitingFor }),
    ...(turn?.quotaWall == null || view.state !== 'parked'
      ? {}
      : { parkedUntil: { until: turn.quotaWall.until, since: turn.quotaWall.since, free: turn.quotaWall.free } }),
    ...(context?.lastFailure == null
      ? {}
      : {
          lastFailure: {
            category: context.lastFailure.category,
            errorText: context.lastFailure.errorText,
            at: context.lastFailure.at,
          },
        }),
    policy: view.policyOverride ?? context?.policy ?? null,
    policySource: view.policyOverride === null ? 'global' : 'session',
    queuedPrompts: view.queued.length + (context?.mailbox.length ?? 0),
    steers: view.steers,
    ...(view.usage == null ? {} : { usage: { total: view.usage.total, byModel: view.usage.byModel } }),
    history: view.history.map((t) => ({ ...t, label: eventLabel(t.event, t.from) })),
    lastSeq: view.lastSeq,
    heldBy: view.heldBy,
    ...(view.webhook === null ? {} : { webhook: view.webhook }),
    approvals:
      turnView?.status === 'running'
        ? view.approvals
            .filter((a) => a.request.turn === turnView.index && a.delivered === null)
            .map((a) => ({
              requestId: a.request.requestId,
              tool: a.request.tool,
              ...(a.request.kind === undefined ? {} : { kind: a.request.kind }),
              arguments: a.request.arguments,
              options: a.request.options,
              requestedAt: a.request.requestedAt,
              deadlineAt: a.request.deadlineAt,
              ...(a.decision === null
                ? {}
                : {
                    decision: {
                      outcome: a.decision.outcome,
                      optionId: a.decision.optionId,
                      by: a.decision.by,
                      at: a.decision.at,
                    },
                  }),
            }))
        : [],
  };
}

function usageOf(usage: UsageTotals | undefined): { usage?: UsageTotals } {
  return usage === undefined ? {} : { usage };
}

/** The latest turn has reached its final state and no prompt waits: nothing more will be written until a new prompt. */
export function isSettled(summary: SessionSummary): boolean {
  return summary.queuedPrompts === 0 && summary.turn !== null && isSettledState(summary.turn.status);
}

function scheduleField(promptId: string | undefined): { schedule?: { id: string; tick: number } } {
  const schedule = scheduleOfPrompt(promptId);
  return schedule === null ? {} : { schedule };
}
