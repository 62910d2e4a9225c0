import type { PersistedSession } from '../../../machines/restore.ts';
import { settleUnqueue, unqueueField, unqueueRequests } from '../queued-prompts.ts';
import type { InboxPrompt } from '../store/session-store.ts';
import type { WarnLog } from './config.ts';
import type { HeldSession } from './lease.ts';

/**
 * The session's prompts into the actor: the inbox read and fed (each prompt once), and the
 * removals an operator asked for (see queued-prompts.ts).
 */
export class PromptFeed {
  /** Used once instead of reading it again: the inbox read with the lease (undefined: read Redis). */
  #loaded: InboxPrompt[] | undefined;
  /**
   * Ids of the inbox prompts this holder has handed to the actor. The inbox is trimmed by a later
   * (batched) write, so a read made before that write lands still holds them: they must be neither
   * fed nor counted for the trim again (counted twice, the trim would drop prompts that came after).
   */
  readonly #fed = new Set<string>();

  constructor(loaded: InboxPrompt[] | undefined) {
    this.#loaded = loaded;
  }

  /** Feeds the inbox's new prompts to the actor; the inbox is trimmed with the next write. */
  async pull(held: HeldSession): Promise<void> {
    const loaded = this.#loaded;
    this.#loaded = undefined;
    const read = loaded ?? (await held.store.inbox(held.sessionId));
    // An id no longer in the inbox was trimmed for good: no need to remember it.
    const present = new Set(read.map((prompt) => prompt.id));
    for (const id of this.#fed) if (!present.has(id)) this.#fed.delete(id);
    const prompts = read.filter((prompt) => !this.#fed.has(prompt.id));
    const actor = held.fenced.actor;
    if (prompts.length === 0 || actor === null) return;
    const sessionOptions = parseObject(held.meta.options);
    for (const prompt of prompts) {
      this.#fed.add(prompt.id);
      // A removed prompt's tombstone is trimmed with the others, never fed.
      if (prompt.removed === true) continue;
      const retryOf = typeof prompt.retryOf === 'number' ? { retryOf: prompt.retryOf } : {};
      actor.send({
        type: 'session.prompt',
        prompt: { id: prompt.id, text: prompt.text, options: { ...sessionOptions, ...prompt.options }, ...retryOf },
      });
    }
    held.fenced.writer.inboxConsumed(prompts.length);
    held.fenced.persist();
  }
}

/** Applies the removals recorded before this holder took the session to its persisted mailbox (before the actor runs). */
export async function dropRemoved(held: HeldSession, persisted: PersistedSession): Promise<void> {
  const requests = unqueueRequests(held.meta);
  if (requests.size === 0) return;
  const context = persisted.snapshot.context;
  for (const [id, state] of requests) {
    if (state !== 'drop' && state !== 'pending') continue;
    const inMailbox = context.mailbox.some((p) => p.id === id);
    if (inMailbox) context.mailbox = context.mailbox.filter((p) => p.id !== id);
    if (state === 'drop') await held.store.redis.hdel(held.store.key(held.sessionId, 'meta'), unqueueField(id));
    else
      await settleUnqueue(held.store, held.sessionId, id, inMailbox || !startedIn(context, id) ? 'removed' : 'started');
  }
}

/** Decides the removals an operator asked for while this worker holds the session. */
export async function applyUnqueue(held: HeldSession, warn: WarnLog): Promise<void> {
  const actor = held.fenced.actor;
  if (actor === null) return;
  held.meta = (await held.store.meta(held.sessionId)) ?? held.meta;
  for (const [id, state] of unqueueRequests(held.meta)) {
    if (state !== 'pending') continue;
    const context = actor.getSnapshot().context;
    const inMailbox = context.mailbox.some((p) => p.id === id);
    // Not in the mailbox and not started: unread, its inbox entry a tombstone (never fed).
    const outcome = inMailbox || !startedIn(context, id) ? 'removed' : 'started';
    if (inMailbox) {
      actor.send({ type: 'session.unqueue', promptId: id });
      held.fenced.persist();
      // The snapshot without it is in Redis before the operator is told it is removed.
      await held.fenced.writer.flush().catch((error: unknown) =>
        warn('the snapshot without a removed prompt was not written before the removal was settled', error, {
          promptId: id,
        }),
      );
    }
    await settleUnqueue(held.store, held.sessionId, id, outcome);
  }
}

function startedIn(context: { turn: { promptId: string } | null; finishedPromptIds: string[] }, id: string): boolean {
  return context.turn?.promptId === id || context.finishedPromptIds.includes(id);
}

function parseObject(raw: string | undefined): Record<string, unknown> {
  if (raw === undefined || raw === '') return {};
  try {
    const value = JSON.parse(raw) as unknown;
    return value !== null && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : {};
  } catch {
    // Silent: the meta's options were checked when stored; unreadable ones mean no session-wide options.
    return {};
  }
}
