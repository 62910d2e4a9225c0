import { z } from 'zod';
import { ATTEMPT_DEFAULTS } from '../../config/defaults.ts';

/**
 * How sessiond answers an ACP agent's `session/request_permission`, lowest first:
 * - `reject`: the agent's `reject_once` option (else `reject_always`; else the request is
 *   answered `cancelled`). The tool does not run; the agent goes on with the turn.
 * - `ask`: an operator decides (`approval.requested` / `approval.decided`, see
 *   src/runtime/approvals/): the request waits, durably, for `sessiond approve` / `deny`, the API,
 *   the dashboard or an ACP client; the deployment policy's deadline denies, its rules may allow
 *   at once. Without the durable runtime (`sessiond run`) nobody can be asked: rejected.
 * - `allow`: the agent's `allow_once` option (never `allow_always`, which the agent would keep).
 * What the agent runs without asking is the agent's own configuration (its argv and settings,
 * the operator's), not sessiond's.
 */
export const PERMISSION_MODES = ['reject', 'ask', 'allow'] as const;
export type PermissionMode = (typeof PERMISSION_MODES)[number];

/** The name part of an `acp:<name>` agent. */
export const ACP_NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;
export const ACP_PREFIX = 'acp:';

/** Longest prompt sent in one `session/prompt` (it is one JSON line on the agent's stdin). */
export const MAX_PROMPT_BYTES = 8 * 1024 * 1024;

const SessionSchema = z.discriminatedUnion('mode', [
  z.object({ mode: z.literal('new') }),
  z.object({ mode: z.literal('resume'), id: z.string().min(1).max(1000) }),
]);

/**
 * One attempt of an operator-configured ACP agent: `command`, `args` and `env` come from the
 * host's configuration (`agents."acp:<name>"`); a caller chooses only `cwd`, `idleTimeoutMs` and
 * `permissionMode` (within the deployment policy). No retry fields: the session machine is the
 * only retry owner.
 */
export const AcpOptionsSchema = z.strictObject({
  prompt: z
    .string()
    .refine((p) => p.trim() !== '', 'must not be empty')
    .refine((p) => Buffer.byteLength(p, 'utf8') <= MAX_PROMPT_BYTES, `must be at most ${MAX_PROMPT_BYTES} bytes`),
  /** The ACP agent's executable: a path, or a name looked up on PATH, node_modules/.bin and agent-clis/node_modules/.bin. */
  command: z
    .string({
      error:
        'must be set in the host configuration (agents."acp:<name>".command): no ACP agent of that name is configured on this worker',
    })
    .min(1),
  args: z.array(z.string()).max(200).default([]),
  env: z.record(z.string(), z.string()).default({}),
  cwd: z.string().min(1).optional(),
  permissionMode: z.enum(PERMISSION_MODES).default('reject'),
  session: SessionSchema.default({ mode: 'new' }),
  /** No output line for this long stops the attempt as a `timeout` failure. */
  idleTimeoutMs: z.number().int().min(1000).max(86_400_000).default(ATTEMPT_DEFAULTS.idleTimeoutMs),
  /** After `session/cancel`, how long the agent may take to end its prompt before it is stopped. */
  cancelGraceMs: z.number().int().min(0).max(60_000).default(3000),
});

export type AcpOptionsInput = z.input<typeof AcpOptionsSchema>;
export type AcpOptions = z.output<typeof AcpOptionsSchema>;

export function formatOptionErrors(error: z.ZodError): string {
  return error.issues.map((issue) => `${issue.path.join('.') || 'options'}: ${issue.message}`).join('; ');
}
