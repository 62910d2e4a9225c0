import { ConflictError, InputError, NotFoundError } from '../../errors.ts';
import { chooseOption, REQUEST_ID_PATTERN, type ApprovalVerdict } from '../approvals/decide.ts';
import { checkSessionId, type CallerParts } from './parts.ts';

// An operator's answer to an agent's permission request.

/** A decision as recorded: the outcome, the option given to the agent, who decided and when. */
export interface ApprovalDecided {
  sessionId: string;
  requestId: string;
  outcome: 'allowed' | 'denied';
  optionId: string | null;
  by: string;
  at: number;
}

/**
 * An operator's answer to a permission request of the session (`by`: who, as the audit names
 * them). The first decision wins; the worker holding the session gives it to the agent (once),
 * or — nobody holds it — the next activation does when its agent asks again. Refused with nothing
 * written: InputError (a bad id, an option the agent did not offer for this verdict),
 * NotFoundError (unknown session or request), ConflictError (already decided).
 */
export async function decideApproval(
  parts: CallerParts,
  sessionId: string,
  requestId: string,
  verdict: ApprovalVerdict,
  by: string,
  option?: string,
  reason?: string,
): Promise<ApprovalDecided> {
  checkSessionId(sessionId);
  if (!REQUEST_ID_PATTERN.test(requestId))
    throw new InputError([
      {
        field: 'requestId',
        message: `must be an approval request id such as t1-0123456789ab-1 (got ${JSON.stringify(requestId.slice(0, 100))})`,
      },
    ]);
  if (reason !== undefined && reason.length > 1000)
    throw new InputError([{ field: 'reason', message: 'must be at most 1000 characters' }]);
  const stored = await parts.approvals.get(sessionId, requestId);
  if (stored === null) {
    if ((await parts.store.meta(sessionId)) === null) throw new NotFoundError(`unknown session "${sessionId}"`);
    throw new NotFoundError(`session "${sessionId}" has no approval request "${requestId}" (its turn may be over)`);
  }
  const chosen = chooseOption(stored.request.options, verdict, option);
  if (!chosen.ok) throw new InputError([{ field: 'option', message: chosen.message }]);
  const at = Date.now();
  const outcome = verdict === 'allow' ? 'allowed' : 'denied';
  const result = await parts.approvals.decide(sessionId, requestId, {
    outcome,
    optionId: chosen.optionId,
    by,
    at,
    ...(reason === undefined ? {} : { reason }),
  });
  if (!result.found) throw new NotFoundError(`session "${sessionId}" has no approval request "${requestId}"`);
  if (!result.decided)
    throw new ConflictError(
      `approval request "${requestId}" was already decided (${result.decision.outcome} by ${result.decision.by})`,
    );
  await parts.approvals.markAnswered(sessionId, requestId);
  await parts.bus.publish({ sessionId, kind: 'approval' });
  return { sessionId, requestId, outcome, optionId: chosen.optionId, by, at };
}
