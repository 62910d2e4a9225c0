import type { ClientContext } from './context.ts';
import type { ReaderContext } from './reader-context.ts';

/**
 * context.ts's openClient, loaded by its first call: context.ts reaches the client and with it the
 * whole runtime (BullMQ, zod, the agents), which a command's module must not load for `--help` or
 * for another command's run. The split points of the client commands: the bundle loads the
 * runtime's chunk here, and a read-only command (openReader) only the reader's.
 */
export async function openClient(flags?: Record<string, unknown>): Promise<ClientContext> {
  return (await import('./context.ts')).openClient(flags);
}

/** reader-context.ts's openReader, loaded by its first call: the reads (Redis and the stores) alone. */
export async function openReader(flags?: Record<string, unknown>): Promise<ReaderContext> {
  return (await import('./reader-context.ts')).openReader(flags);
}
