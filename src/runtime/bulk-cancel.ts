import type { Redis } from 'ioredis';
import type { Keys } from './keys.ts';
import { listPage } from './lifecycle/listing.ts';
import { hgetEach } from './redis/batch.ts';

/** The states a bulk cancel may select: those with a turn to cancel or one about to start. */
export const CANCELLABLE_STATES = ['queued', 'running', 'backoff', 'parked'] as const;

export interface CancelFilter {
  state: string;
  agent?: string;
  /** At most this many sessions (default and ceiling 10,000): a bulk cancel never grows without bound. */
  max?: number;
}

export const BULK_CANCEL_MAX = 10_000;

/**
 * The sessions a bulk cancel selects: read from the state's index set (newest first, a page at a
 * time), never by scanning every session; each one's agent read from its record.
 */
export async function selectForCancel(
  redis: Redis,
  keys: Keys,
  shards: number,
  filter: CancelFilter,
): Promise<Array<{ sessionId: string; state: string; agent: string }>> {
  const max = Math.min(BULK_CANCEL_MAX, Math.max(1, filter.max ?? BULK_CANCEL_MAX));
  const out: Array<{ sessionId: string; state: string; agent: string }> = [];
  let cursor: string | undefined;
  do {
    const page = await listPage(
      redis,
      keys,
      { state: filter.state, limit: 500, ...(cursor === undefined ? {} : { cursor }) },
      shards,
    );
    const agents = await hgetEach(
      redis,
      page.sessions.map((s) => keys.session(s.sessionId, 'meta')),
      'agent',
    );
    page.sessions.forEach((s, i) => {
      const agent = agents[i] ?? 'pi';
      if (out.length < max && (filter.agent === undefined || agent === filter.agent))
        out.push({ sessionId: s.sessionId, state: s.state, agent });
    });
    cursor = page.next ?? undefined;
  } while (cursor !== undefined && out.length < max);
  return out;
}
