import { awaitingApproval, summarize, type SessionView } from '../../../runtime/inspect.ts';
import type { Client } from '../../../api/client.ts';
import { runtimeOf } from '../../../api/bind.ts';
import type { SessionRecord } from '../../../runtime/runtime.ts';
import { HttpError } from '../body.ts';
import { unknownSession } from '../route.ts';

/** The session as stored (its id already checked by the route), or a 404 `not_found`. */
export async function sessionOr404(client: Client, id: string): Promise<SessionRecord> {
  const view = await runtimeOf(client).getSession(id);
  if (view === null) throw unknownSession(id);
  return view;
}

export function policyError(errors: Array<{ field: string; message: string }>): HttpError {
  return new HttpError(
    400,
    'retry policy not changed',
    errors.map((e) => ({ field: e.field, message: e.message })),
  );
}

/** `GET /api/sessions/:id`: the operator's summary plus the raw machine context. */
export function detail(view: SessionRecord) {
  return {
    ...summarize(view),
    options: view.options,
    queued: view.queued,
    cancelRequested: view.cancelRequested,
    context: view.context,
  };
}

/** One row of `GET /api/sessions`. */
export function listItem(s: SessionView) {
  return {
    sessionId: s.sessionId,
    state: s.state,
    agent: s.agent,
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
    turn:
      s.turn === null
        ? null
        : {
            index: s.turn.index,
            status: s.turn.status,
            attempts: s.turn.attempts.length,
            prompt: s.turn.prompt === null ? null : s.turn.prompt.slice(0, 200),
            ...(s.turn.prompt === null ? {} : { promptLength: s.turn.prompt.length }),
          },
    ...(s.nextRetryAt === undefined ? {} : { nextRetryAt: s.nextRetryAt }),
    ...(s.waitingFor === undefined ? {} : { waitingFor: s.waitingFor }),
    ...(s.parkedUntil === undefined ? {} : { parkedUntil: s.parkedUntil }),
    ...(awaitingApproval(s) ? { awaitingApproval: true } : {}),
    ...(s.lastFailure === undefined ? {} : { lastFailure: { category: s.lastFailure.category, at: s.lastFailure.at } }),
    queuedPrompts: s.queuedPrompts,
  };
}
