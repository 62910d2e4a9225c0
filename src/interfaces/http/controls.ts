import type { Hono } from 'hono';
import { SESSION_ID_PATTERN } from '../../runtime/keys.ts';
import type { Runtime } from '../../runtime/runtime.ts';
import { SCOPE_KEY, type RouteScope } from './auth/route-scopes.ts';
import { HttpError } from './body.ts';

/**
 * Operator controls of the HTTP API: retry a failed turn, resume a session parked at a quota wall, list and remove queued prompts. Handlers only call
 * the runtime; `controlPaths()` is their part of the OpenAPI document.
 */
export function registerControls(app: Hono, runtime: Runtime): void {
  app.post('/api/sessions/:id/retry', async (c) => {
    const id = c.req.param('id');
    if (!SESSION_ID_PATTERN.test(id)) throw new HttpError(404, `unknown session "${id}"`);
    return c.json(await runtime.retry(id), 202);
  });
  app.post('/api/sessions/:id/resume', async (c) => {
    const id = c.req.param('id');
    if (!SESSION_ID_PATTERN.test(id)) throw new HttpError(404, `unknown session "${id}"`);
    return c.json(await runtime.resumeParked(id), 202);
  });
  // Bulk cancel by filter, from the query (no body): ?state=S&agent=A&dryRun=true.
  app.post('/api/bulk/cancel', async (c) => {
    const q = c.req.query();
    const dryRun = q.dryRun === 'true' || q.dryRun === '1';
    return c.json(
      await runtime.cancelMatching({ state: q.state, ...(q.agent === undefined ? {} : { agent: q.agent }), dryRun, ...(q.reason === undefined ? {} : { reason: q.reason }) }),
    );
  });
  app.get('/api/sessions/:id/queue', async (c) => {
    const id = c.req.param('id');
    if (!SESSION_ID_PATTERN.test(id)) throw new HttpError(404, `unknown session "${id}"`);
    return c.json({ sessionId: id, prompts: await runtime.queuedPrompts(id) });
  });
  app.delete('/api/sessions/:id/queue/:promptId', async (c) => {
    const id = c.req.param('id');
    if (!SESSION_ID_PATTERN.test(id)) throw new HttpError(404, `unknown session "${id}"`);
    return c.json(await runtime.removeQueuedPrompt(id, c.req.param('promptId')));
  });
}

type Json = Record<string, unknown>;
const ref = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: Json, description: string): Json => ({ description, content: { 'application/json': { schema } } });
const error = (description: string): Json => json(ref('Error'), description);
const scope = (s: RouteScope): Json => ({ [SCOPE_KEY]: s, security: [{ bearerAuth: [] }, { loginCookie: [] }] });
const idParam = { name: 'id', in: 'path', required: true, description: 'Session id', schema: { type: 'string', pattern: '^(?!\\.{1,2}$)[A-Za-z0-9_.-]{1,100}$' } };

/** The OpenAPI paths of the controls. */
export function controlPaths(): Json {
  return {
    '/api/sessions/{id}/retry': {
      post: {
        operationId: 'retryTurn',
        tags: ['sessions'],
        summary: "Re-run the session's failed last turn as a new turn: the same prompt, a new series of attempts under the policy in force",
        description:
          "The agent's conversation is continued as the machine's retry rules say: when the failed attempt had recorded the prompt in the agent's session, that session is resumed with a short continuation, so the prompt is in the conversation once.",
        ...scope('write'),
        parameters: [idParam],
        responses: {
          '202': json(
            { type: 'object', required: ['sessionId', 'turn', 'retryOf'], properties: { sessionId: { type: 'string' }, turn: { type: 'integer' }, retryOf: { type: 'integer' } } },
            'the retry is queued as turn `turn`',
          ),
          '400': json(ref('ValidationError'), 'a field is invalid'),
          '404': error('unknown session'),
          '409': error('the last turn did not fail, a prompt waits, a cancel is pending, or the session is being deleted'),
        },
      },
    },
    '/api/sessions/{id}/resume': {
      post: {
        operationId: 'resumeParked',
        tags: ['sessions'],
        summary: "Resume a session parked at a quota wall now, before the provider's reset: its next attempt starts (under a fleet limit, once admitted)",
        description: 'Not to be confused with `POST /api/dispatch/resume`, which resumes paused dispatch.',
        ...scope('write'),
        parameters: [idParam],
        responses: {
          '202': json(
            {
              type: 'object',
              required: ['sessionId', 'turn', 'parkedUntil', 'delivered'],
              properties: { sessionId: { type: 'string' }, turn: { type: 'integer' }, parkedUntil: { type: 'integer' }, delivered: { enum: ['worker', 'activation'] } },
            },
            'the resume was handed to the session (its worker, or its activation run now)',
          ),
          '404': error('unknown session'),
          '409': error('the session is not parked at a quota wall, or is being deleted'),
        },
      },
    },
    '/api/bulk/cancel': {
      post: {
        operationId: 'cancelMatching',
        tags: ['sessions'],
        summary: 'Cancel every session in a state (queued, running, backoff, parked), optionally of one agent; `dryRun=true` lists them and cancels nothing',
        ...scope('admin'),
        parameters: [
          { name: 'state', in: 'query', required: true, schema: { enum: ['queued', 'running', 'backoff', 'parked'] } },
          { name: 'agent', in: 'query', schema: { type: 'string' } },
          { name: 'dryRun', in: 'query', schema: { type: 'string', enum: ['true', 'false', '1', '0'] } },
          { name: 'reason', in: 'query', schema: { type: 'string' } },
        ],
        responses: {
          '200': json(
            {
              type: 'object',
              required: ['dryRun', 'matched', 'cancelled'],
              properties: {
                dryRun: { type: 'boolean' },
                cancelled: { type: 'integer' },
                matched: { type: 'array', items: { type: 'object', properties: { sessionId: { type: 'string' }, state: { type: 'string' }, agent: { type: 'string' } } } },
              },
            },
            'what matched, and how many were cancelled',
          ),
          '400': json(ref('ValidationError'), 'a bad state, agent'),
        },
      },
    },
    '/api/sessions/{id}/queue': {
      get: {
        operationId: 'listQueuedPrompts',
        tags: ['sessions'],
        summary: 'The prompts waiting for their turn, in the order the turns will run',
        ...scope('read'),
        parameters: [idParam],
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
      },
    },
    '/api/sessions/{id}/queue/{promptId}': {
      delete: {
        operationId: 'removeQueuedPrompt',
        tags: ['sessions'],
        summary: 'Remove a queued prompt; safe against a worker taking it meanwhile (then the answer is 409: its turn has started)',
        ...scope('write'),
        parameters: [idParam, { name: 'promptId', in: 'path', required: true, description: 'the prompt id as listed', schema: { type: 'string' } }],
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
          '409': error('its turn has started (cancel the turn instead), the session is being deleted, or its worker did not answer in time'),
        },
      },
    },
  };
}
