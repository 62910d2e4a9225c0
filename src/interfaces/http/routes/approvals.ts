import { z } from 'zod';
import { error, invalid, json, MUTATING_ERRORS } from '../route.ts';
import { defineRoute } from './context.ts';

/** `POST /api/sessions/:id/approvals/:requestId`: an operator's answer to an agent's permission request. */
export const ApprovalBody = z.strictObject({
  decision: z.enum(['allow', 'deny'], { error: 'must be allow or deny' }),
  /** The option to give the agent, by its id or kind (default: `allow_once` / `reject_once`). */
  option: z.string().min(1).max(200).optional(),
  reason: z.string().trim().min(1, 'must not be empty').max(1000, 'must be at most 1000 characters').optional(),
});

/** Answering an agent's permission requests. */
export const approvalRoutes = [
  defineRoute({
    method: 'post',
    path: '/api/sessions/{id}/approvals/{requestId}',
    operationId: 'decideApproval',
    tags: ['sessions'],
    summary: "Answer an agent's permission request (the session's `approvals`): allow or deny; the first decision wins",
    scope: 'write',
    parameters: [
      {
        name: 'requestId',
        in: 'path',
        required: true,
        description: 'The request id of its approval.requested message',
        schema: { type: 'string', pattern: '^t\\d{1,9}-[0-9a-f]{12}-\\d{1,4}$' },
      },
    ],
    body: {
      schema: ApprovalBody,
      examples: {
        allow: {
          summary: "allow, with the agent's allow_once option",
          value: { decision: 'allow', option: 'allow_once' },
        },
        deny: { summary: 'deny, with a reason', value: { decision: 'deny', reason: 'not on this branch' } },
      },
    },
    responses: {
      '200': json(
        {
          type: 'object',
          required: ['sessionId', 'requestId', 'outcome', 'optionId', 'by', 'at'],
          properties: {
            sessionId: { type: 'string' },
            requestId: { type: 'string' },
            outcome: { enum: ['allowed', 'denied'] },
            optionId: { type: ['string', 'null'] },
            by: { type: 'string' },
            at: { type: 'integer' },
          },
        },
        'the decision was stored; the worker holding the session gives it to the agent (or the next activation does, when the agent asks again)',
      ),
      '400': invalid(),
      '404': error('unknown session or request (its turn may be over)'),
      '409': error('the request was already decided'),
      ...MUTATING_ERRORS,
    },
    async handler(c, { id, body }, { client, auth, logger }) {
      const principal = auth.principalOf(c);
      const by = `http:${principal?.name ?? principal?.via ?? 'open'}`;
      const result = await client.approvals.decide(id, c.req.param('requestId') ?? '', {
        verdict: body.decision,
        by,
        option: body.option,
        reason: body.reason,
      });
      logger.info(
        { audit: 'approval.decide', sessionId: id, requestId: result.requestId, outcome: result.outcome, by },
        'approval decided',
      );
      return c.json(result, 200);
    },
  }),
];
