import { z } from 'zod';
import { pendingWebhookEvents, replayWebhooks, webhookDeadLetters } from '../../../api/webhooks.ts';
import { invalid, json, MUTATING_ERRORS } from '../route.ts';
import { defineRoute } from './context.ts';

/** `since`: a dead letter's number (as listed) or an ISO 8601 time. */
const since = z.string().min(1, 'must not be empty').max(64, 'must be at most 64 characters');

const DEAD_LETTER = {
  type: 'object',
  required: ['seq', 'deadAt', 'sessionId', 'id', 'type', 'attempts', 'lastError', 'body'],
  properties: {
    seq: { type: 'integer', description: 'the dead letter’s number (replay --since takes it)' },
    deadAt: { type: 'string', format: 'date-time' },
    sessionId: { type: 'string' },
    id: { type: 'string', description: 'the event’s webhook-id' },
    type: { type: 'string' },
    attempts: { type: 'integer' },
    lastError: { type: 'string' },
    body: { type: 'string', description: 'the event as it was sent (JSON text)' },
  },
};

/** Webhook delivery (SESSIOND_WEBHOOKS): the events waiting, the dead letters, and sending them again. */
export const ReplayBody = z.strictObject({ since });

export const webhookRoutes = [
  defineRoute({
    method: 'get',
    path: '/api/webhooks/pending',
    operationId: 'listPendingWebhooks',
    tags: ['webhooks'],
    summary: 'Sessions with webhook events waiting for delivery, and when the next attempt is due',
    scope: 'read',
    responses: {
      '200': json(
        {
          type: 'array',
          items: {
            type: 'object',
            required: ['sessionId', 'waiting', 'nextAt'],
            properties: {
              sessionId: { type: 'string' },
              waiting: { type: 'integer' },
              nextAt: { type: ['integer', 'null'], description: 'ms since the epoch' },
            },
          },
        },
        'the sessions with events waiting',
      ),
    },
    handler: async (c, _input, { client }) => c.json(await pendingWebhookEvents(client)),
  }),
  defineRoute({
    method: 'get',
    path: '/api/webhooks/dead',
    operationId: 'listWebhookDeadLetters',
    tags: ['webhooks'],
    summary: 'Dead letters: webhook events not delivered within `webhookDelivery.maxAgeMs`, oldest first',
    scope: 'read',
    parameters: [
      {
        name: 'since',
        in: 'query',
        description: 'only those from this dead-letter number, or dead since this time (ISO 8601)',
        schema: { type: 'string' },
      },
    ],
    // Unknown parameters are ignored, as on every other route (a stream ticket, `?ticket=`, is the auth layer's).
    query: z.object({ since: since.optional() }),
    responses: {
      '200': json({ type: 'array', items: DEAD_LETTER }, 'the dead letters'),
      '400': invalid('`since` is neither a dead-letter number nor a time'),
    },
    handler: async (c, { query }, { client }) => c.json(await webhookDeadLetters(client, query.since)),
  }),
  defineRoute({
    method: 'post',
    path: '/api/webhooks/replay',
    operationId: 'replayWebhooks',
    tags: ['webhooks'],
    summary:
      'Send dead letters again (same webhook-id, retried from zero), from a dead-letter number or a time (`{"since"}`)',
    scope: 'admin',
    body: {
      schema: ReplayBody,
      examples: {
        seq: { summary: 'from dead letter 1 on', value: { since: '1' } },
        time: { summary: 'those dead since a time', value: { since: '2026-12-01T00:00:00Z' } },
      },
    },
    responses: {
      '200': json(
        { type: 'object', required: ['replayed'], properties: { replayed: { type: 'integer' } } },
        'how many were put back for delivery',
      ),
      '400': invalid(),
      ...MUTATING_ERRORS,
    },
    handler: async (c, { body }, { client }) => c.json(await replayWebhooks(client, body.since), 200),
  }),
];
