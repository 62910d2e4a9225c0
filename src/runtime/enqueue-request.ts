import { z } from 'zod';
import { SESSION_ID_PATTERN } from './keys.ts';
import { MAX_PRIORITY, MIN_PRIORITY } from './queue.ts';
import { WHEN_BUSY } from '../policy/schema.ts';

/** What `enqueue` takes (validated here; the options by the agent registry, the policy by the deployment's). Loaded by the first write. */
export const EnqueueRequestSchema = z.strictObject({
  sessionId: z.string().regex(SESSION_ID_PATTERN, 'must be 1-100 letters, digits or _.-, and not . or ..').optional(),
  // Its maximum length is the deployment policy's (maxPromptChars).
  prompt: z.string().refine((p) => p.trim() !== '', 'must not be empty'),
  // Checked by the agent registry's TurnOptionsSchema in enqueue.
  options: z.record(z.string(), z.unknown()).optional(),
  retryPolicy: z.record(z.string(), z.unknown()).optional(),
  /** How long the session is kept once finished (a duration, `0`: forever), within the deployment's maximum. */
  retention: z.union([z.string(), z.number().int().nonnegative()]).optional(),
  /** The caller's tenant, recorded with a new session (fleet limits may match on it). */
  tenant: z
    .string()
    .regex(/^[A-Za-z0-9_.@-]{1,100}$/, 'must be 1-100 letters, digits or _.@-')
    .optional(),
  /** Higher starts first under a fleet limit or a full fleet; applies to the session from this prompt on. */
  priority: z
    .number({ error: `must be an integer from ${MIN_PRIORITY} to ${MAX_PRIORITY}` })
    .int(`must be an integer from ${MIN_PRIORITY} to ${MAX_PRIORITY}`)
    .min(MIN_PRIORITY, `must be an integer from ${MIN_PRIORITY} to ${MAX_PRIORITY}`)
    .max(MAX_PRIORITY, `must be an integer from ${MIN_PRIORITY} to ${MAX_PRIORITY}`)
    .optional(),
  /**
   * What the prompt does when the session is busy (a turn runs or prompts wait): `enqueue` (the default) waits its
   * turn; `steer` goes into the running turn; `interrupt` stops the running turn and runs next; `reject` is
   * refused (SessionBusyError) with nothing written; `rollback` interrupts and takes the interrupted turn back.
   * The deployment policy (`policy.whenBusy`) may allow fewer.
   */
  whenBusy: z.enum(WHEN_BUSY, { error: `must be one of ${WHEN_BUSY.join(', ')}` }).optional(),
  /**
   * The session's own webhook (docs/operations/webhooks.md): every event of this session is POSTed there, signed with
   * a `whsec_` secret generated now and returned once (`webhookSecret`). Its host must be in the deployment policy's
   * `webhooks.hosts`. Replaces the session's webhook (and secret) if it had one.
   */
  webhook: z.string().max(2048, 'must be at most 2048 characters').optional(),
});
export type EnqueueRequest = z.input<typeof EnqueueRequestSchema>;
export type EnqueueRequestOutput = z.output<typeof EnqueueRequestSchema>;

/** A ZodError's issues as InputError fields (`options.cwd`, `(body)` for the whole). */
export function zodIssues(
  error: z.ZodError | undefined,
  prefix: readonly PropertyKey[] = [],
): Array<{ field: string; message: string }> {
  return (error?.issues ?? []).map((issue) => ({
    field: [...prefix, ...issue.path].join('.') || '(body)',
    message: issue.message,
  }));
}
