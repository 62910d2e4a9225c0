import { z } from 'zod';
import { error, invalid, json, MUTATING_ERRORS, ref } from '../route.ts';
import { defineRoute } from './context.ts';

/** `POST /api/sessions/:id/cancel` (the body may be empty). */
export const CancelBody = z.strictObject({
  reason: z.string().trim().min(1, 'must not be empty').max(1000, 'must be at most 1000 characters').optional(),
});

/** The operator's controls of a session's turn: cancel it, re-run a failed one, resume a parked one; cancel sessions by filter. */
export const controlRoutes = [
  defineRoute({
    method: 'post',
    path: '/api/sessions/{id}/cancel',
    operationId: 'cancelSession',
    tags: ['sessions'],
    summary: "Cancel the session's current turn, wherever it runs",
    scope: 'write',
    body: {
      schema: CancelBody,
      required: false,
      examples: {
        reason: { summary: 'with a reason', value: { reason: 'taking too long' } },
        empty: { summary: 'no reason', value: {} },
      },
    },
    responses: {
      '202': json(
        {
          type: 'object',
          required: ['sessionId', 'delivered'],
          properties: { sessionId: { type: 'string' }, delivered: { enum: ['worker', 'activation'] } },
        },
        'the cancel was recorded and delivered',
      ),
      '400': invalid(),
      '404': error('unknown session'),
      ...MUTATING_ERRORS,
    },
    async handler(c, { id, body }, { client }) {
      const { delivered } = await client.session(id).cancel(body.reason);
      return c.json({ sessionId: id, delivered }, 202);
    },
  }),
  defineRoute({
    method: 'post',
    path: '/api/sessions/{id}/retry',
    operationId: 'retryTurn',
    tags: ['sessions'],
    summary:
      "Re-run the session's failed last turn as a new turn: the same prompt, a new series of attempts under the policy in force",
    description:
      "The agent's conversation is continued as the machine's retry rules say: when the failed attempt had recorded the prompt in the agent's session, that session is resumed with a short continuation, so the prompt is in the conversation once.",
    scope: 'write',
    responses: {
      '202': json(
        {
          type: 'object',
          required: ['sessionId', 'turn', 'retryOf'],
          properties: { sessionId: { type: 'string' }, turn: { type: 'integer' }, retryOf: { type: 'integer' } },
        },
        'the retry is queued as turn `turn`',
      ),
      '400': json(ref('ValidationError'), 'a field is invalid'),
      '404': error('unknown session'),
      '409': error('the last turn did not fail, a prompt waits, a cancel is pending, or the session is being deleted'),
    },
    handler: async (c, { id }, { client }) => c.json(await client.session(id).retry(), 202),
  }),
  defineRoute({
    method: 'post',
    path: '/api/sessions/{id}/resume',
    operationId: 'resumeParked',
    tags: ['sessions'],
    summary:
      "Resume a session parked at a quota wall now, before the provider's reset: its next attempt starts (under a fleet limit, once admitted)",
    description: 'Not to be confused with `POST /api/dispatch/resume`, which resumes paused dispatch.',
    scope: 'write',
    responses: {
      '202': json(
        {
          type: 'object',
          required: ['sessionId', 'turn', 'parkedUntil', 'delivered'],
          properties: {
            sessionId: { type: 'string' },
            turn: { type: 'integer' },
            parkedUntil: { type: 'integer' },
            delivered: { enum: ['worker', 'activation'] },
          },
        },
        'the resume was handed to the session (its worker, or its activation run now)',
      ),
      '404': error('unknown session'),
      '409': error('the session is not parked at a quota wall, or is being deleted'),
    },
    handler: async (c, { id }, { client }) => c.json(await client.session(id).resume(), 202),
  }),
  defineRoute({
    method: 'post',
    path: '/api/bulk/cancel',
    operationId: 'cancelMatching',
    tags: ['sessions'],
    summary:
      'Cancel every session in a state (queued, running, backoff, parked), optionally of one agent; `dryRun=true` lists them and cancels nothing',
    scope: 'admin',
    // From the query (no body): ?state=S&agent=A&dryRun=true; the client validates state and agent.
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
            matched: {
              type: 'array',
              items: {
                type: 'object',
                properties: { sessionId: { type: 'string' }, state: { type: 'string' }, agent: { type: 'string' } },
              },
            },
          },
        },
        'what matched, and how many were cancelled',
      ),
      '400': json(ref('ValidationError'), 'a bad state, agent'),
    },
    async handler(c, { query: q }, { client }) {
      const dryRun = q.dryRun === 'true' || q.dryRun === '1';
      return c.json(
        await client.sessions.cancelMatching({
          state: q.state,
          ...(q.agent === undefined ? {} : { agent: q.agent }),
          dryRun,
          ...(q.reason === undefined ? {} : { reason: q.reason }),
        }),
      );
    },
  }),
];
