import { z } from 'zod';

/**
 * What a caller of sessiond (enqueue, the HTTP API) may choose for an agent's
 * turns: the working directory, the idle timeout, and the agent's own choices
 * in `shape`. Everything else (executable, environment, extra argv, dirs of the
 * host) is the worker's configuration.
 */
export function callerOptions<T extends z.ZodRawShape>(shape: T) {
  return z.strictObject({
    cwd: z.string().min(1).max(4096).optional(),
    idleTimeoutMs: z.number().int().min(1000).max(86_400_000).optional(),
    /** The repository (and branch, tag or commit) a new session's workspace starts from (docs/workspaces.md). */
    workspace: z
      .strictObject({
        repo: z
          .string()
          .min(1)
          .max(4096)
          .refine((r) => !r.startsWith('-'), 'must not start with -'),
        ref: z
          .string()
          .regex(/^[\w./@^~{}-]{1,256}$/, 'must be a branch, tag or commit')
          .refine((r) => !r.startsWith('-'), 'must not start with -')
          .optional(),
      })
      .optional(),
    ...shape,
  });
}
