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
    ...shape,
  });
}
