import { z } from 'zod';
import { HttpError } from '../body.ts';
import { error, invalid, json, queryInt, ref } from '../route.ts';
import { defineRoute } from './context.ts';
import { sessionOr404 } from './views.ts';

export const MessagesQuery = z.object({
  from: queryInt(1, Number.MAX_SAFE_INTEGER).optional(),
  limit: queryInt(1, 1000).optional(),
});

export const EventsQuery = z.object({
  from: queryInt(1, Number.MAX_SAFE_INTEGER).optional(),
});

/** A session's messages: a page of the log, and the live event stream (SSE). */
export const messageRoutes = [
  defineRoute({
    method: 'get',
    path: '/api/sessions/{id}/messages',
    operationId: 'listMessages',
    tags: ['messages'],
    summary: 'A page of the message log, from a seq on',
    scope: 'read',
    parameters: [
      { name: 'from', in: 'query', description: 'first seq (default 1)', schema: { type: 'integer', minimum: 1 } },
      { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 1000, default: 500 } },
    ],
    query: MessagesQuery,
    responses: {
      '200': json(ref('MessagePage'), 'the page; ask again from `nextFrom`'),
      '400': invalid(),
      '404': error('unknown session'),
    },
    async handler(c, { id, query }, { client }) {
      const view = await sessionOr404(client, id);
      const from = query.from ?? 1;
      const messages = await client.session(id).messages({ from, limit: query.limit ?? 500 });
      const last = messages.at(-1);
      return c.json({
        sessionId: id,
        from,
        messages,
        nextFrom: last === undefined ? from : last.seq + 1,
        lastSeq: view.lastSeq,
      });
    },
  }),
  defineRoute({
    method: 'get',
    path: '/api/sessions/{id}/events',
    operationId: 'streamEvents',
    tags: ['messages'],
    summary:
      'Live message stream (Server-Sent Events): every stored message from `from` (or after `Last-Event-ID`), then new ones as they are written',
    description:
      'Each event: `id:` the seq, `event:` the message type, `data:` `{seq, turn, attempt, type, content}`. A reconnecting EventSource sends `Last-Event-ID` and resumes with the next seq: no gap, no duplicate. Comments (`: keep-alive`) are sent every 15 s. Bounded: at most `http.maxStreams` streams per server (503 with Retry-After beyond), closed after `http.streamIdleTimeout` without a message, and when the stream ticket (or login) it was opened with expires.',
    scope: 'read',
    streamTicket: true,
    parameters: [
      {
        name: 'from',
        in: 'query',
        description: 'first seq (default 1); `Last-Event-ID` wins',
        schema: { type: 'integer', minimum: 1 },
      },
      {
        name: 'Last-Event-ID',
        in: 'header',
        description: 'the last seq received: the stream resumes after it',
        schema: { type: 'string', pattern: '^\\d+$' },
      },
      {
        name: 'ticket',
        in: 'query',
        description: 'a stream ticket (`POST /api/sessions/{id}/stream-ticket`), for clients that cannot send headers',
        schema: { type: 'string' },
      },
    ],
    query: EventsQuery,
    responses: {
      '200': {
        description: 'the event stream',
        content: {
          'text/event-stream': {
            schema: { type: 'string', description: 'SSE events whose `data` is a `Message` (see components)' },
          },
        },
      },
      '400': invalid('a bad `from` or `Last-Event-ID`'),
      '401': error('no valid credential, or an expired stream ticket'),
      '404': error('unknown session'),
      '429': error('the token holds its maxStreams live streams on this server (`limit`: maxStreams); `Retry-After`'),
      '503': error('`http.maxStreams` streams are live; `Retry-After` says when to try again'),
    },
    async handler(c, { id, query }, { client, auth, streams }) {
      await sessionOr404(client, id);
      const lastEventId = c.req.header('last-event-id');
      let from = query.from ?? 1;
      if (lastEventId !== undefined && lastEventId.trim() !== '') {
        if (!/^\d{1,16}$/.test(lastEventId.trim()) || !Number.isSafeInteger(Number(lastEventId.trim())))
          throw new HttpError(400, 'invalid Last-Event-ID', [
            { field: 'Last-Event-ID', message: 'must be a message seq (an integer)' },
          ]);
        from = Number(lastEventId.trim()) + 1;
      }
      return streams.open(c, id, from, auth.principalOf(c));
    },
  }),
];
