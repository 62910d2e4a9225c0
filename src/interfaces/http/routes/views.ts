import { awaitingApproval, summarize } from '../../../runtime/inspect.ts';
import type { Client, SessionView } from '../../../api/client.ts';
import { HttpError } from '../body.ts';
import { unknownSession } from '../route.ts';

/** The session (its id already checked by the route), or a 404. */
export async function sessionOr404(client: Client, id: string): Promise<SessionView> {
  const view = await client.session(id).inspect();
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
export function detail(view: SessionView) {
  return {
    ...summarize(view),
    options: view.options,
    queued: view.queued,
    cancelRequested: view.cancelRequested,
    context: view.context,
  };
}

/** One row of `GET /api/sessions`. */
export function listItem(view: SessionView) {
  const s = summarize(view);
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
