import { z } from 'zod';
import { RetryPolicySchema, type RetryPolicy } from '../../../retry/policy.ts';
import { error, invalid, json, MUTATING_ERRORS, ref, schemaOf } from '../route.ts';
import { defineRoute } from './context.ts';
import { policyError } from './views.ts';

/**
 * A patch of the policy: any JSON here, since the client merges it over the policy in force and names each
 * field out of range with its allowed range (nothing is changed then); hence the cast to a patch's type below.
 * Documented as the policy's fields.
 */
const PATCH_DOCUMENT = schemaOf(RetryPolicySchema, 'input');
const patch = (examples: Record<string, { summary: string; value: unknown }>) => ({
  schema: z.unknown(),
  document: PATCH_DOCUMENT,
  examples,
});

/** The global retry policy and each session's override. */
export const retryPolicyRoutes = [
  defineRoute({
    method: 'get',
    path: '/api/retry-policy',
    operationId: 'getRetryPolicy',
    tags: ['retry-policy'],
    summary: 'The global retry policy',
    scope: 'read',
    responses: { '200': json(ref('PolicyResponse'), 'the policy and where it comes from') },
    handler: async (c, _input, { client }) => c.json(await client.retryPolicy.get()),
  }),
  defineRoute({
    method: 'put',
    path: '/api/retry-policy',
    operationId: 'putRetryPolicy',
    tags: ['retry-policy'],
    summary: 'Change fields of the global policy; on any invalid field nothing is changed',
    scope: 'admin',
    body: patch({
      patch: {
        summary: 'change some fields; the rest keep their value',
        value: { maxAttempts: 5, initialDelayMs: 2000, jitter: 'full' },
      },
    }),
    responses: {
      '200': json(ref('PolicyResponse'), 'the new policy'),
      '400': invalid('a field is out of range (`issues` name it and the allowed range); nothing changed'),
      ...MUTATING_ERRORS,
    },
    async handler(c, { body }, { client }) {
      const result = await client.retryPolicy.set(body as Partial<RetryPolicy>);
      if (!result.ok) throw policyError(result.errors);
      return c.json({ policy: result.policy, source: 'global' });
    },
  }),
  defineRoute({
    method: 'delete',
    path: '/api/retry-policy',
    operationId: 'resetRetryPolicy',
    tags: ['retry-policy'],
    summary: 'Back to the defaults',
    scope: 'admin',
    responses: { '200': json(ref('PolicyResponse'), 'the default policy'), ...MUTATING_ERRORS },
    handler: async (c, _input, { client }) => c.json({ policy: await client.retryPolicy.reset(), source: 'default' }),
  }),
  defineRoute({
    method: 'get',
    path: '/api/sessions/{id}/retry-policy',
    operationId: 'getSessionRetryPolicy',
    tags: ['retry-policy'],
    summary: 'The policy in force for a session: its own, else the global one',
    scope: 'read',
    responses: { '200': json(ref('PolicyResponse'), 'the policy and its source'), '404': error('unknown session') },
    handler: async (c, { id }, { client }) => c.json(await client.retryPolicy.get({ sessionId: id })),
  }),
  defineRoute({
    method: 'put',
    path: '/api/sessions/{id}/retry-policy',
    operationId: 'putSessionRetryPolicy',
    tags: ['retry-policy'],
    summary:
      'Give a session a policy of its own (fields over the one in force); the running turn takes it at its next retry decision',
    scope: 'admin',
    body: patch({
      patch: { summary: "this session's own policy", value: { maxAttempts: 2, retryOn: ['server_error', 'network'] } },
    }),
    responses: {
      '200': json(ref('PolicyResponse'), 'the new policy'),
      '400': invalid('a field is out of range; nothing changed'),
      '404': error('unknown session'),
      ...MUTATING_ERRORS,
    },
    async handler(c, { id, body }, { client }) {
      const result = await client.retryPolicy.set(body as Partial<RetryPolicy>, { sessionId: id });
      if (!result.ok) throw policyError(result.errors);
      return c.json({ policy: result.policy, source: 'session' });
    },
  }),
  defineRoute({
    method: 'delete',
    path: '/api/sessions/{id}/retry-policy',
    operationId: 'resetSessionRetryPolicy',
    tags: ['retry-policy'],
    summary: "Drop a session's own policy: it follows the global one again",
    scope: 'admin',
    responses: {
      '200': json(ref('PolicyResponse'), 'the policy now in force'),
      '404': error('unknown session'),
      ...MUTATING_ERRORS,
    },
    async handler(c, { id }, { client }) {
      const policy = await client.retryPolicy.reset({ sessionId: id });
      return c.json({ policy, source: (await client.retryPolicy.get({ sessionId: id })).source });
    },
  }),
];
