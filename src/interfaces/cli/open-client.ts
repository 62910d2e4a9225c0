import type { ClientContext } from './context.ts';

/**
 * context.ts's openClient, loaded by its first call: context.ts reaches the client and with it the
 * whole runtime (BullMQ, zod, the agents), which a command's module must not load for `--help` or
 * for another command's run. The one split point of the client commands (the bundle loads the
 * runtime's chunk here).
 */
export async function openClient(flags?: Record<string, unknown>): Promise<ClientContext> {
  return (await import('./context.ts')).openClient(flags);
}
