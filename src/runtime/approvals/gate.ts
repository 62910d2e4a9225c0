import { createHash } from 'node:crypto';
import {
  denial,
  optionOfKind,
  type ApprovalAnswer,
  type ApprovalAsk,
  type ApprovalGate,
} from '../../agents/shared/approval-gate.ts';
import type { ApprovalPolicy } from '../../policy/index.ts';
import type { CliMessage } from '../../protocol/index.ts';
import type { ApprovalDecisionRecord, ApprovalRequestRecord, ApprovalStore, StoredApproval } from './store.ts';

export interface AttemptApprovalsInit {
  store: ApprovalStore;
  sessionId: string;
  /** The lease token of the holder (every write of the gate is fenced). */
  token: string;
  agent: string;
  turn: number;
  attempt: number;
  policy: ApprovalPolicy;
  /** Subscribes to "a decision for this session was stored" (pub/sub); returns the unsubscribe. */
  onDecision: (listener: () => void) => () => void;
  /** How often the gate looks at Redis even without a pub/sub event. */
  pollMs: number;
  /** Called before a request is stored (the holder then clears the session's requests when the turn is over). */
  onStore?: () => void;
}

/**
 * The approval gate of one attempt (see agents/shared/approval-gate.ts). A request's id is stable
 * across attempts of the turn: the turn, a digest of the tool, its kind and arguments, and the
 * occurrence of that digest — so the agent of a later attempt asking the same thing again (after a
 * worker died) finds the same request, its deadline, and a decision made meanwhile, which it
 * applies at once. A decision is given to an agent once (`delivered`, fenced): a request whose
 * decision an earlier attempt already delivered is a new request when asked again.
 */
export class AttemptApprovals implements ApprovalGate {
  readonly #init: AttemptApprovalsInit;
  /** Ids this attempt has asked (bounded by MAX_APPROVALS_PER_SESSION through the store). */
  readonly #used = new Set<string>();

  constructor(init: AttemptApprovalsInit) {
    this.#init = init;
  }

  async ask(
    request: ApprovalAsk,
    emit: (message: CliMessage) => void,
    signal: AbortSignal,
  ): Promise<ApprovalAnswer | null> {
    const { store, sessionId, token, attempt } = this.#init;
    try {
      const requestId = await this.#requestId(request);
      this.#used.add(requestId);
      const now = Date.now();
      const record: ApprovalRequestRecord = {
        requestId,
        turn: this.#init.turn,
        toolCallId: request.toolCallId,
        tool: request.tool,
        ...(request.kind === undefined ? {} : { kind: request.kind }),
        arguments: request.arguments,
        options: request.options,
        requestedAt: now,
        deadlineAt: now + this.#init.policy.deadlineMs,
      };
      this.#init.onStore?.();
      const stored = await store.ask(sessionId, token, record, attempt);
      if (stored === null) {
        const answer = denial(request.options);
        emit(requestedMessage(record, false));
        emit(
          decidedMessage(record, answer, {
            outcome: 'denied',
            optionId: answer.optionId,
            by: 'sessiond',
            at: Date.now(),
            reason: 'too many approval requests in this session',
          }),
        );
        return answer;
      }
      const asked = stored.request;
      emit(
        requestedMessage(
          { ...asked, toolCallId: request.toolCallId },
          stored.asked.some((a) => a !== attempt),
        ),
      );
      if (stored.decision === null && this.#autoAllowed(request)) {
        const option = optionOfKind(request.options, ['allow_once', 'allow_always']);
        if (option !== undefined)
          await store.decide(sessionId, requestId, {
            outcome: 'allowed',
            optionId: option.optionId,
            by: 'policy',
            at: Date.now(),
            reason: 'an approvals.autoAllow rule of the deployment policy',
          });
      } else if (stored.decision === null) {
        await store.markWaiting(sessionId, requestId, asked.deadlineAt);
      }
      const decision = stored.decision ?? (await this.#wait(asked, signal));
      if (decision === null) return null;
      const answer = answerFor(decision, request);
      await store.deliver(sessionId, token, requestId, attempt);
      await store.markAnswered(sessionId, requestId);
      emit(decidedMessage({ ...asked, toolCallId: request.toolCallId }, answer, decision));
      return answer;
    } catch {
      // Redis unreachable or the lease lost: the attempt is going down; the agent gets no decision.
      return signal.aborted ? null : denial(request.options);
    }
  }

  /** The first id of this request's digest that this attempt has not used and no earlier attempt got a decision for. */
  async #requestId(request: ApprovalAsk): Promise<string> {
    const digest = createHash('sha256')
      .update(JSON.stringify([request.tool, request.kind ?? null, request.arguments ?? null]))
      .digest('hex')
      .slice(0, 12);
    for (let n = 1; ; n++) {
      const id = `t${this.#init.turn}-${digest}-${n}`;
      if (this.#used.has(id)) continue;
      const stored = await this.#init.store.get(this.#init.sessionId, id);
      if (stored !== null && stored.delivered !== null && stored.delivered !== this.#init.attempt) continue;
      return id;
    }
  }

  #autoAllowed(request: ApprovalAsk): boolean {
    return this.#init.policy.autoAllow.some(
      (rule) =>
        (rule.agent === undefined || rule.agent === this.#init.agent) &&
        (rule.kind === undefined || rule.kind === request.kind) &&
        (rule.tool === undefined || rule.tool === request.tool),
    );
  }

  /** Until a decision is stored (by anyone), the deadline passes (then denied here), or the attempt stops (null). */
  async #wait(request: ApprovalRequestRecord, signal: AbortSignal): Promise<ApprovalDecisionRecord | null> {
    const { store, sessionId } = this.#init;
    let wake: () => void = () => undefined;
    const unsubscribe = this.#init.onDecision(() => wake());
    const onAbort = (): void => wake();
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      for (;;) {
        if (signal.aborted) return null;
        const current: StoredApproval | null = await store.get(sessionId, request.requestId);
        if (current?.decision != null) return current.decision;
        const left = request.deadlineAt - Date.now();
        if (left <= 0) {
          const timedOut = await store.decide(sessionId, request.requestId, {
            outcome: 'denied',
            optionId: denial(request.options).optionId,
            by: 'deadline',
            at: Date.now(),
            reason: `not answered within the deployment's approvals.deadlineMs (${this.#init.policy.deadlineMs} ms)`,
          });
          if (timedOut.found) return timedOut.decision;
          return null;
        }
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, Math.min(left, this.#init.pollMs));
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
    } finally {
      unsubscribe();
      signal.removeEventListener('abort', onAbort);
    }
  }
}

/** What the agent gets for a decision: its chosen option when the agent offered it, else the kind's equivalent. */
function answerFor(decision: ApprovalDecisionRecord, request: ApprovalAsk): ApprovalAnswer {
  if (decision.optionId !== null && request.options.some((o) => o.optionId === decision.optionId))
    return { optionId: decision.optionId, outcome: decision.outcome };
  if (decision.outcome === 'allowed') {
    const option = optionOfKind(request.options, ['allow_once', 'allow_always']);
    if (option !== undefined) return { optionId: option.optionId, outcome: 'allowed' };
  }
  return denial(request.options);
}

function requestedMessage(record: ApprovalRequestRecord, reasked: boolean): CliMessage {
  return {
    type: 'approval.requested',
    content: {
      requestId: record.requestId,
      toolCallId: record.toolCallId,
      tool: record.tool,
      ...(record.kind === undefined ? {} : { kind: record.kind }),
      arguments: record.arguments,
      options: record.options,
      requestedAt: record.requestedAt,
      deadlineAt: record.deadlineAt,
      ...(reasked ? { reasked: true } : {}),
    },
  };
}

function decidedMessage(
  record: ApprovalRequestRecord,
  answer: ApprovalAnswer,
  decision: ApprovalDecisionRecord,
): CliMessage {
  return {
    type: 'approval.decided',
    content: {
      requestId: record.requestId,
      toolCallId: record.toolCallId,
      outcome: answer.outcome,
      optionId: answer.optionId,
      by: decision.by,
      at: decision.at,
      ...(decision.reason === undefined ? {} : { reason: decision.reason }),
    },
  };
}
