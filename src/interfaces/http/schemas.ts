import { z } from 'zod';
import { EnqueueRequestSchema } from '../../runtime/enqueue-request.ts';
import { SESSION_STATES, type SessionState } from '../../../machines/states.ts';

/**
 * The request schemas of the HTTP API. The runtime's own schemas are reused
 * (enqueue); the OpenAPI document is generated from these, so it cannot drift.
 */

/** `POST /api/sessions`: the runtime's enqueue request. */
export const CreateSessionBody = EnqueueRequestSchema;

/** `POST /api/sessions/:id/prompts`. */
export const PromptBody = EnqueueRequestSchema.pick({ prompt: true, options: true, priority: true });

/** `POST /api/dispatch/pause` and `/resume` (the body may be empty: the whole fleet). */
export const DispatchBody = z.strictObject({
  limit: z.string().min(1, 'must not be empty').max(200, 'must be at most 200 characters').optional(),
});

/** `POST /api/sessions/:id/cancel` (the body may be empty). */
export const CancelBody = z.strictObject({
  reason: z.string().trim().min(1, 'must not be empty').max(1000, 'must be at most 1000 characters').optional(),
});

/** `POST /api/sessions/:id/approvals/:requestId`: an operator's answer to an agent's permission request. */
export const ApprovalBody = z.strictObject({
  decision: z.enum(['allow', 'deny'], { error: 'must be allow or deny' }),
  /** The option to give the agent, by its id or kind (default: `allow_once` / `reject_once`). */
  option: z.string().min(1).max(200).optional(),
  reason: z.string().trim().min(1, 'must not be empty').max(1000, 'must be at most 1000 characters').optional(),
});

const queryInt = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d+$/, `must be an integer from ${min} to ${max}`)
    .transform(Number)
    .pipe(z.number().int().min(min, `must be an integer from ${min} to ${max}`).max(max, `must be an integer from ${min} to ${max}`));

export const ListQuery = z.object({
  state: z.enum(SESSION_STATES as [SessionState, ...SessionState[]], { error: `must be one of ${SESSION_STATES.join(', ')}` }).optional(),
  limit: queryInt(1, 1000).optional(),
  cursor: z.string().max(1000, 'must be the `next` of an earlier page').optional(),
});

/** `DELETE /api/sessions/:id?force=true`. */
export const DeleteQuery = z.object({
  force: z
    .enum(['true', 'false', '1', '0'], { error: 'must be true or false' })
    .transform((v) => v === 'true' || v === '1')
    .optional(),
});

export const MessagesQuery = z.object({
  from: queryInt(1, Number.MAX_SAFE_INTEGER).optional(),
  limit: queryInt(1, 1000).optional(),
});

export const EventsQuery = z.object({
  from: queryInt(1, Number.MAX_SAFE_INTEGER).optional(),
});

/** `POST /api/login`. */
export const LoginBody = z.strictObject({ token: z.string().min(1, 'must not be empty').max(4096, 'must be at most 4096 characters') });
