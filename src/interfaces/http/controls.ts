import type { Hono } from 'hono';
import { SESSION_ID_PATTERN } from '../../runtime/keys.ts';
import type { Runtime } from '../../runtime/runtime.ts';
import { SCOPE_KEY, type RouteScope } from './auth/route-scopes.ts';
import { HttpError } from './body.ts';

/**
 * Operator controls of the HTTP API: retry a failed turn. Handlers only call
 * the runtime; `controlPaths()` is their part of the OpenAPI document.
 */
export function registerControls(app: Hono, runtime: Runtime): void {
  app.post('/api/sessions/:id/retry', async (c) => {
    const id = c.req.param('id');
    if (!SESSION_ID_PATTERN.test(id)) throw new HttpError(404, `unknown session "${id}"`);
    return c.json(await runtime.retry(id), 202);
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
        description: "The agent's conversation is continued as the machine's retry rules say: when the failed attempt had recorded the prompt in the agent's session, that session is resumed with a short continuation, so the prompt is in the conversation once.",
        ...scope('write'),
        parameters: [idParam],
        responses: {
          '202': json({ type: 'object', required: ['sessionId', 'turn', 'retryOf'], properties: { sessionId: { type: 'string' }, turn: { type: 'integer' }, retryOf: { type: 'integer' } } }, 'the retry is queued as turn `turn`'),
          '400': json(ref('ValidationError'), 'a field is invalid'),
          '404': error('unknown session'),
          '409': error('the last turn did not fail, a prompt waits, a cancel is pending, or the session is being deleted'),
        },
      },
    },
  };
}
