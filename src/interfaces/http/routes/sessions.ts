import { z } from 'zod';
import { SESSION_STATES, type SessionState } from '../../../../machines/states.ts';
import { EnqueueRequestSchema } from '../../../runtime/enqueue-request.ts';
import { HttpError } from '../body.ts';
import { callerRequest } from '../auth/caller.ts';
import { error, invalid, json, MUTATING_ERRORS, queryInt, ref } from '../route.ts';
import { defineRoute } from './context.ts';
import { filteredPage, queryTime, READ_BUDGET, SCAN_BUDGET } from './session-filter.ts';
import { detail, listItem, sessionOr404 } from './views.ts';

/** `POST /api/sessions`: the runtime's enqueue request. */
export const CreateSessionBody = EnqueueRequestSchema;

export const ListQuery = z.object({
  state: z
    .enum(SESSION_STATES as [SessionState, ...SessionState[]], { error: `must be one of ${SESSION_STATES.join(', ')}` })
    .optional(),
  limit: queryInt(1, 1000).optional(),
  cursor: z.string().max(1000, 'must be the `next` of an earlier page').optional(),
  q: z.string().trim().min(1, 'must not be empty').max(100, 'must be at most 100 characters').optional(),
  agent: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9:._-]{0,199}$/, 'must be an agent name (letters, digits, and : . _ -)')
    .optional(),
  updatedSince: queryTime.optional(),
});

/** `DELETE /api/sessions/:id?force=true`. */
export const DeleteQuery = z.object({
  force: z
    .enum(['true', 'false', '1', '0'], { error: 'must be true or false' })
    .transform((v) => v === 'true' || v === '1')
    .optional(),
});

/** Sessions: list, create, read, export, delete. */
export const sessionRoutes = [
  defineRoute({
    method: 'get',
    path: '/api/sessions',
    operationId: 'listSessions',
    tags: ['sessions'],
    summary: 'List sessions, newest first, optionally filtered by id, state, agent and update time',
    description: `Newest first by creation. \`state\` is read from the listing's index; \`q\` (a piece of the id, any case), \`agent\` and \`updatedSince\` are matched session by session: one request looks at up to ${SCAN_BUDGET} sessions of the index and reads up to ${READ_BUDGET}, so a filtered page may hold fewer than \`limit\` sessions (even none) and still have a \`next\` to go on from.`,
    scope: 'read',
    parameters: [
      { name: 'state', in: 'query', schema: { type: 'string', enum: SESSION_STATES } },
      { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 1000, default: 100 } },
      { name: 'cursor', in: 'query', description: 'the `next` of the previous page', schema: { type: 'string' } },
      {
        name: 'q',
        in: 'query',
        description: 'a piece of the session id, any case',
        schema: { type: 'string', minLength: 1, maxLength: 100 },
      },
      {
        name: 'agent',
        in: 'query',
        description: "the session's agent (`pi`, `acp:qwen`…)",
        schema: { type: 'string', pattern: '^[A-Za-z0-9][A-Za-z0-9:._-]{0,199}$' },
      },
      {
        name: 'updatedSince',
        in: 'query',
        description: 'sessions changed at or after this time: epoch milliseconds or an ISO 8601 date',
        schema: { type: 'string' },
        example: '2026-12-03T09:00:00Z',
      },
      {
        name: 'If-None-Match',
        in: 'header',
        description: 'the `ETag` of an earlier answer: 304 when nothing in the listing changed',
        schema: { type: 'string' },
      },
    ],
    query: ListQuery,
    responses: {
      '200': json(
        ref('SessionList'),
        'the sessions (an `ETag` header; `next`: the cursor of the next page, null on the last)',
      ),
      '304': { description: 'nothing in the listing changed since that ETag' },
      '400': invalid(),
    },
    async handler(c, { query }, { client }) {
      // Nothing shown in the listing changed since the caller's copy: 304, without reading a session.
      const etag = `W/"${await client.sessions.listingVersion()}.${Buffer.from(new URL(c.req.url).search, 'utf8').toString('base64url')}"`;
      if (c.req.header('if-none-match') === etag) return c.body(null, 304, { ETag: etag });
      const { views, next, scanned } = await filteredPage(
        client,
        {
          ...(query.state === undefined ? {} : { state: query.state }),
          ...(query.q === undefined ? {} : { q: query.q }),
          ...(query.agent === undefined ? {} : { agent: query.agent }),
          ...(query.updatedSince === undefined ? {} : { updatedSince: query.updatedSince }),
        },
        query.limit ?? 100,
        query.cursor,
      );
      return c.json({ sessions: views.map(listItem), next, scanned }, 200, { ETag: etag });
    },
  }),
  defineRoute({
    method: 'post',
    path: '/api/sessions',
    operationId: 'createSession',
    tags: ['sessions'],
    summary: 'Create a session with a prompt (or add the prompt to the session `sessionId` if it exists)',
    scope: 'write',
    body: {
      schema: CreateSessionBody,
      examples: {
        minimal: { summary: 'a prompt, default agent options', value: { prompt: 'List the files in this directory' } },
        full: {
          summary: 'own id, agent options and a retry policy of its own',
          value: {
            sessionId: 'build-42',
            prompt: 'Fix the failing test',
            options: { cwd: '/tmp', provider: 'fake', model: 'text', thinking: 'low' },
            retryPolicy: { maxAttempts: 3, initialDelayMs: 500 },
          },
        },
      },
    },
    responses: {
      '201': json(ref('Enqueued'), 'created; the prompt is turn 1'),
      '202': json(ref('Enqueued'), 'the session existed: the prompt was added to it'),
      '400': invalid(
        'malformed JSON, or a field is invalid (`issues` name each one; `tenant` other than the credential’s, `priority` above its maxPriority)',
      ),
      '409': error(
        'the session is being deleted, its message log is full (`limit`: maxLogMessages, maxLogBytes), or it is busy and `whenBusy` is `reject`: the prompt was not stored',
      ),
      '429': error(
        'too many prompts waiting (`limit`: maxQueuedPrompts), or the token has its maxSessions sessions (`limit`: maxSessions): nothing was stored',
      ),
      ...MUTATING_ERRORS,
    },
    async handler(c, { body }, { client, auth }) {
      // A retry policy is the admin's to set, also when it comes with a new session.
      if (body.retryPolicy !== undefined && auth.principalOf(c)?.scope !== 'admin') {
        throw new HttpError(403, 'setting a retry policy needs an admin token', [
          { field: 'retryPolicy', message: 'needs scope admin' },
        ]);
      }
      // Issue 25: the tenant and the highest priority are the credential's, the session cap its token's (auth/caller.ts).
      const { request, how } = callerRequest(auth, auth.principalOf(c), body);
      const { sessionId, turn, created, promptId, steered, webhookSecret } = await client.sessions.enqueue(
        request,
        how,
      );
      return c.json(
        {
          sessionId,
          turn,
          created,
          promptId,
          ...(steered ? { steered } : {}),
          ...(webhookSecret === undefined ? {} : { webhookSecret }),
        },
        created ? 201 : 202,
      );
    },
  }),
  defineRoute({
    method: 'get',
    path: '/api/sessions/{id}',
    operationId: 'getSession',
    tags: ['sessions'],
    summary: 'A session: state, latest turn with its attempts, transition history, machine context',
    scope: 'read',
    responses: { '200': json(ref('SessionDetail'), 'the session'), '404': error('unknown session') },
    handler: async (c, { id }, { client }) => c.json(detail(await sessionOr404(client, id))),
  }),
  defineRoute({
    method: 'delete',
    path: '/api/sessions/{id}',
    operationId: 'deleteSession',
    tags: ['sessions'],
    summary: 'Delete a session fleet-wide: every key, its message log, agent state, activation job and index entries',
    description:
      'Without `force`, only a finished session (nothing running, waiting, backing off or queued); with `force=true` a running turn is cancelled first (its process tree gone). Deleting again within the hour answers `deleted: false`.',
    scope: 'admin',
    parameters: [{ name: 'force', in: 'query', schema: { type: 'string', enum: ['true', 'false', '1', '0'] } }],
    query: DeleteQuery,
    responses: {
      '200': json(
        {
          type: 'object',
          required: ['sessionId', 'deleted', 'cancelled'],
          properties: { sessionId: { type: 'string' }, deleted: { type: 'boolean' }, cancelled: { type: 'boolean' } },
        },
        'deleted (deleted: false when it already was)',
      ),
      '400': invalid(),
      '404': error('unknown session'),
      '409': error('the session is active and force was not given'),
      ...MUTATING_ERRORS,
    },
    async handler(c, { id, query }, { client, auth, logger }) {
      const principal = auth.principalOf(c);
      const actor =
        principal === null ? 'http:anonymous' : `http:${principal.name ?? principal.via}(${principal.scope})`;
      const result = await client.session(id).delete({ force: query.force === true, actor });
      logger.info(
        {
          audit: 'session.delete',
          sessionId: id,
          force: query.force === true,
          deleted: result.deleted,
          cancelled: result.cancelled,
        },
        'session deleted',
      );
      return c.json(result, 200);
    },
  }),
  defineRoute({
    method: 'get',
    path: '/api/sessions/{id}/export',
    operationId: 'exportSession',
    tags: ['sessions'],
    summary:
      'The session as a versioned JSON-lines archive (header, meta, snapshot, history, every message, agent state, its workspace as a git bundle, queued prompts, end) for `sessiond import`',
    scope: 'read',
    responses: {
      '200': { description: 'the archive', content: { 'application/x-ndjson': { schema: { type: 'string' } } } },
      '404': error('unknown session'),
      '409': error('the session is being deleted, or has a workspace and this server runs no workspaces'),
    },
    async handler(c, { id }, { client }) {
      const archive = await client.session(id).export();
      return c.body(archive, 200, {
        'Content-Type': 'application/x-ndjson; charset=utf-8',
        'Content-Disposition': `attachment; filename="${id}.sessiond.jsonl"`,
      });
    },
  }),
];
