import { z } from 'zod';
import { invalid, json, MUTATING_ERRORS } from '../route.ts';
import { defineRoute } from './context.ts';

/** `POST /api/dispatch/pause` and `/resume` (the body may be empty: the whole fleet). */
export const DispatchBody = z.strictObject({
  limit: z.string().min(1, 'must not be empty').max(200, 'must be at most 200 characters').optional(),
});

// `{"limit": NAME}` pauses (resumes) one limit of the deployment's (SESSIOND_LIMITS) only.
const FLEET = { fleet: { summary: 'the whole fleet', value: {} } };

/** The fleet limits, and pausing and resuming dispatch under them. */
export const limitRoutes = [
  defineRoute({
    method: 'get',
    path: '/api/limits',
    operationId: 'getLimits',
    tags: ['limits'],
    summary:
      'The fleet limits: each rule, what its keys hold and how many sessions wait, cooldowns, and whether dispatch is paused',
    scope: 'read',
    responses: { '200': json({ type: 'object', required: ['paused', 'limits'] }, 'the limits') },
    handler: async (c, _input, { client }) => c.json(await client.dispatch.status()),
  }),
  defineRoute({
    method: 'post',
    path: '/api/dispatch/pause',
    operationId: 'pauseDispatch',
    tags: ['limits'],
    summary:
      'Pause starting attempts fleet-wide, or under one limit (`{"limit": NAME}`): running turns finish, cancels still work',
    scope: 'admin',
    body: { schema: DispatchBody, required: false, examples: FLEET },
    responses: {
      '200': json({ type: 'object', required: ['paused'] }, 'what is paused now'),
      '400': invalid(),
      ...MUTATING_ERRORS,
    },
    handler: async (c, { body }, { client }) => c.json(await client.dispatch.pause(body.limit), 200),
  }),
  defineRoute({
    method: 'post',
    path: '/api/dispatch/resume',
    operationId: 'resumeDispatch',
    tags: ['limits'],
    summary: 'Start attempts again, fleet-wide or under one limit; the sessions waiting for it are woken in order',
    scope: 'admin',
    body: { schema: DispatchBody, required: false, examples: FLEET },
    responses: {
      '200': json(
        { type: 'object', required: ['paused', 'woken'] },
        'what is still paused, and how many sessions were woken',
      ),
      '400': invalid(),
      ...MUTATING_ERRORS,
    },
    handler: async (c, { body }, { client }) => c.json(await client.dispatch.resume(body.limit), 200),
  }),
];
