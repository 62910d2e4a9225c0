import { HttpError, validate } from '../body.ts';
import { EventsQuery, MessagesQuery } from '../schemas.ts';
import type { RouteContext } from './context.ts';
import { sessionOr404 } from './views.ts';

/** A session's messages: a page of the log, and the live event stream (SSE). */
export function registerMessageRoutes(ctx: RouteContext): void {
  const { app, runtime, auth, streams } = ctx;
  app.get('/api/sessions/:id/messages', async (c) => {
    const id = c.req.param('id');
    const query = validate(MessagesQuery, c.req.query());
    const view = await sessionOr404(runtime, id);
    const from = query.from ?? 1;
    const messages = await runtime.readMessages(id, from, query.limit ?? 500);
    const last = messages.at(-1);
    return c.json({ sessionId: id, from, messages, nextFrom: last === undefined ? from : last.seq + 1, lastSeq: view.lastSeq });
  });
  app.get('/api/sessions/:id/events', async (c) => {
    const id = c.req.param('id');
    const query = validate(EventsQuery, c.req.query());
    await sessionOr404(runtime, id);
    const lastEventId = c.req.header('last-event-id');
    let from = query.from ?? 1;
    if (lastEventId !== undefined && lastEventId.trim() !== '') {
      if (!/^\d{1,16}$/.test(lastEventId.trim()) || !Number.isSafeInteger(Number(lastEventId.trim())))
        throw new HttpError(400, 'invalid Last-Event-ID', [{ field: 'Last-Event-ID', message: 'must be a message seq (an integer)' }]);
      from = Number(lastEventId.trim()) + 1;
    }
    return streams.open(c, id, from, auth.principalOf(c));
  });
}
