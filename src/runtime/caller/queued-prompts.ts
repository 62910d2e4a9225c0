import { ConflictError, InputError, NotFoundError } from '../../errors.ts';
import { removeQueued, unqueueField, unqueueRequests } from '../queued-prompts.ts';
import type { QueuedPrompt } from './types.ts';
import { checkSessionId, type CallerParts } from './parts.ts';
import { getSession } from './session-view.ts';

// Prompts waiting for their turn: listed in order, removed safely against a worker taking them.

/** The prompts of the session waiting for their turn, in order. NotFoundError for an unknown session. */
export async function queuedPrompts(parts: CallerParts, sessionId: string): Promise<QueuedPrompt[]> {
  checkSessionId(sessionId);
  // The inbox is read before the snapshot: a holder moves a prompt from the inbox to the snapshot's mailbox (or
  // into a turn) in one write, so a prompt moved between the two reads is in the snapshot read second. Read the
  // other way round, a prompt moved between them was in neither, and the list missed it.
  const inbox = await parts.store.inbox(sessionId);
  const [view, meta] = await Promise.all([getSession(parts, sessionId), parts.store.meta(sessionId)]);
  if (view === null) throw new NotFoundError(`unknown session "${sessionId}"`);
  const removing = unqueueRequests(meta ?? {});
  const context = view.context;
  const started = new Set([
    ...(context?.finishedPromptIds ?? []),
    ...(context?.turn === null || context?.turn === undefined ? [] : [context.turn.promptId]),
  ]);
  const seen = new Set<string>();
  const out: QueuedPrompt[] = [];
  const add = (
    p: { id: string; text: string; enqueuedAt?: number; retryOf?: number },
    where: QueuedPrompt['where'],
  ): void => {
    const state = removing.get(p.id);
    if (seen.has(p.id) || started.has(p.id) || state === 'pending' || state === 'drop' || state === 'removed') return;
    seen.add(p.id);
    out.push({
      position: out.length + 1,
      id: p.id,
      text: p.text,
      enqueuedAt: p.enqueuedAt ?? null,
      where,
      ...(p.retryOf === undefined ? {} : { retryOf: p.retryOf }),
    });
  };
  for (const p of context?.mailbox ?? []) add(p, 'mailbox');
  for (const p of inbox) if (p.removed !== true) add(p, 'inbox');
  return out;
}

/**
 * Removes a queued prompt, safe against a worker taking it meanwhile (see queued-prompts.ts).
 * NotFoundError: unknown session or no such queued prompt; ConflictError: its turn has started
 * (cancel it instead), or the session is being deleted, or its holder did not answer within `waitMs`.
 */
export async function removeQueuedPrompt(
  parts: CallerParts,
  sessionId: string,
  promptId: string,
  options: { waitMs?: number } = {},
): Promise<{ sessionId: string; promptId: string; removed: true }> {
  checkSessionId(sessionId);
  if (!/^[A-Za-z0-9_.:-]{1,200}$/.test(promptId))
    throw new InputError([
      { field: 'promptId', message: `must be a prompt id as listed (got ${JSON.stringify(promptId)})` },
    ]);
  const deadline = Date.now() + (options.waitMs ?? 10_000);
  const field = unqueueField(promptId);
  const meta = parts.store.key(sessionId, 'meta');
  for (;;) {
    const result = await removeQueued(parts.store, sessionId, promptId);
    if (result === 'removed') break;
    if (result === 'unknown_session') throw new NotFoundError(`unknown session "${sessionId}"`);
    if (result === 'deleting') throw new ConflictError(`session "${sessionId}" is being deleted`);
    if (result === 'started')
      throw new ConflictError(
        `prompt "${promptId}" of session "${sessionId}" is no longer queued: its turn has started (cancel the turn instead)`,
      );
    if (result === 'unknown_prompt')
      throw new NotFoundError(`session "${sessionId}" has no queued prompt "${promptId}"`);
    // A worker holds the session: it decides, and says so in the meta.
    for (;;) {
      await parts.bus.publish({ sessionId, kind: 'unqueue' });
      await new Promise((resolve) => setTimeout(resolve, 100));
      const [outcome, held] = await Promise.all([
        parts.redis.hget(meta, field),
        parts.redis.exists(parts.store.key(sessionId, 'lease')),
      ]);
      if (outcome === 'removed' || outcome === 'started') {
        await parts.redis.hdel(meta, field);
        if (outcome === 'started')
          throw new ConflictError(
            `prompt "${promptId}" of session "${sessionId}" is no longer queued: its turn has started (cancel the turn instead)`,
          );
        return { sessionId, promptId, removed: true };
      }
      // The holder let go before answering: decide again, as for a session nobody holds.
      if (outcome === 'pending' && held === 0) break;
      if (Date.now() > deadline)
        throw new ConflictError(
          `the worker holding session "${sessionId}" did not answer within ${options.waitMs ?? 10_000} ms: the removal of prompt "${promptId}" stays pending and is decided when a worker next drives the session`,
        );
    }
  }
  await parts.store.index(sessionId, { touch: true });
  return { sessionId, promptId, removed: true };
}
