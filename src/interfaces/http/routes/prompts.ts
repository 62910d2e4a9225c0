import { EnqueueRequestSchema } from '../../../runtime/enqueue-request.ts';
import { error, invalid, json, MUTATING_ERRORS, ref } from '../route.ts';
import { defineRoute } from './context.ts';
import { callerRequest } from '../auth/caller.ts';
import { sessionOr404 } from './views.ts';

/** `POST /api/sessions/:id/prompts`. */
export const PromptBody = EnqueueRequestSchema.pick({ prompt: true, options: true, priority: true, whenBusy: true });

/** A session's prompts: add one, list the queued ones, remove one before its turn. */
export const promptRoutes = [
  defineRoute({
    method: 'post',
    path: '/api/sessions/{id}/prompts',
    operationId: 'addPrompt',
    tags: ['sessions'],
    summary: 'Add a prompt to a session (it waits for the current turn to end)',
    scope: 'write',
    body: {
      schema: PromptBody,
      examples: {
        next: { summary: 'the next prompt of the conversation', value: { prompt: 'Now explain the change' } },
        steer: {
          summary: 'put this text into the running turn at its next safe point (a new turn if none runs)',
          value: { prompt: 'Use the v2 API instead', whenBusy: 'steer' },
        },
        interrupt: {
          summary: 'stop the running turn and run this one next',
          value: { prompt: 'Stop: use the other branch', whenBusy: 'interrupt' },
        },
      },
    },
    responses: {
      '202': json(ref('Enqueued'), 'queued as the next turn'),
      '400': invalid(
        'malformed JSON, or a field is invalid (`issues` name each one; `priority` above the credential’s maxPriority)',
      ),
      '404': error('unknown session'),
      '409': error(
        'the session is being deleted, its message log is full (`limit`: maxLogMessages, maxLogBytes), or it is busy and `whenBusy` is `reject`: the prompt was not stored',
      ),
      '429': error('too many prompts waiting (`limit`: maxQueuedPrompts): the prompt was not stored'),
      ...MUTATING_ERRORS,
    },
    async handler(c, { id, body }, { client, auth }) {
      await sessionOr404(client, id);
      // Issue 25: the priority at most the credential's maxPriority, its tenant the credential's (auth/caller.ts).
      const { request } = callerRequest(auth, auth.principalOf(c), body);
      const { sessionId, turn, promptId, steered } = await client.session(id).prompt(request);
      return c.json({ sessionId, turn, promptId, ...(steered ? { steered } : {}) }, 202);
    },
  }),
  defineRoute({
    method: 'get',
    path: '/api/sessions/{id}/queue',
    operationId: 'listQueuedPrompts',
    tags: ['sessions'],
    summary: 'The prompts waiting for their turn, in the order the turns will run',
    scope: 'read',
    responses: {
      '200': json(
        {
          type: 'object',
          required: ['sessionId', 'prompts'],
          properties: {
            sessionId: { type: 'string' },
            prompts: {
              type: 'array',
              items: {
                type: 'object',
                required: ['position', 'id', 'text', 'where'],
                properties: {
                  position: { type: 'integer' },
                  id: { type: 'string' },
                  text: { type: 'string' },
                  enqueuedAt: { type: ['integer', 'null'] },
                  where: { enum: ['mailbox', 'inbox'] },
                  retryOf: { type: 'integer' },
                },
              },
            },
          },
        },
        'the queued prompts',
      ),
      '404': error('unknown session'),
    },
    handler: async (c, { id }, { client }) => c.json({ sessionId: id, prompts: await client.prompts.list(id) }),
  }),
  defineRoute({
    method: 'delete',
    path: '/api/sessions/{id}/queue/{promptId}',
    operationId: 'removeQueuedPrompt',
    tags: ['sessions'],
    summary:
      'Remove a queued prompt; safe against a worker taking it meanwhile (then the answer is 409: its turn has started)',
    scope: 'write',
    parameters: [
      {
        name: 'promptId',
        in: 'path',
        required: true,
        description: 'the prompt id as listed',
        schema: { type: 'string' },
      },
    ],
    responses: {
      '200': json(
        {
          type: 'object',
          required: ['sessionId', 'promptId', 'removed'],
          properties: { sessionId: { type: 'string' }, promptId: { type: 'string' }, removed: { const: true } },
        },
        'removed: it will not run',
      ),
      '400': json(ref('ValidationError'), 'a bad prompt id'),
      '404': error('unknown session, or no such queued prompt'),
      '409': error(
        'its turn has started (cancel the turn instead), the session is being deleted, or its worker did not answer in time',
      ),
    },
    handler: async (c, { id }, { client }) => c.json(await client.prompts.remove(id, c.req.param('promptId') ?? '')),
  }),
];
