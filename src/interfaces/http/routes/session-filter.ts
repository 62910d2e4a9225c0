import { z } from 'zod';
import type { Client, SessionView } from '../../../api/client.ts';
import { hasErrorCode } from '../../../errors.ts';

/**
 * `GET /api/sessions` with filters: the listing index is ordered by creation time and holds only the id
 * and state, so the id and the state are matched from it and the agent and the update time from each
 * candidate's view. A page is filled by walking the index from the cursor until `limit` sessions match or
 * the walk's budget is spent; `next` is where the walk stopped either way, so a caller goes on from there
 * (a page may hold fewer than `limit` sessions, or none, and still have a `next`).
 */

/** Index entries looked at per request: an id substring over many sessions costs no session read. */
export const SCAN_BUDGET = 20_000;
/** Sessions read (inspected) per request, for the agent and the update time. */
export const READ_BUDGET = 2_000;
/** The listing is read from Redis in pages of this many. */
const CHUNK = 500;

/** A time in the query: epoch milliseconds or an ISO 8601 date. */
export const queryTime = z
  .string()
  .trim()
  .min(1, 'must be a time: epoch milliseconds or an ISO 8601 date')
  .transform((text, ctx) => {
    const at = /^\d+$/.test(text) ? Number(text) : /^\d{4}-\d{2}-\d{2}/.test(text) ? Date.parse(text) : NaN;
    if (!Number.isSafeInteger(at) || at < 0) {
      ctx.addIssue({ code: 'custom', message: 'must be a time: epoch milliseconds or an ISO 8601 date' });
      return z.NEVER;
    }
    return at;
  });

export interface SessionFilter {
  /** A piece of the id, any case. */
  q?: string;
  state?: string;
  agent?: string;
  /** Epoch ms: sessions whose last change is at or after it. */
  updatedSince?: number;
}

/** Whether the filter needs each candidate's view (the agent, the update time). */
const readsViews = (filter: SessionFilter) => filter.agent !== undefined || filter.updatedSince !== undefined;

/**
 * One page of the sessions matching `filter`, newest first, with their views; `scanned`: index entries looked at.
 * Without a filter beyond the state it is the listing's own page.
 */
export async function filteredPage(
  client: Client,
  filter: SessionFilter,
  limit: number,
  cursor: string | undefined,
): Promise<{ views: SessionView[]; next: string | null; scanned: number }> {
  const state = filter.state === undefined ? {} : { state: filter.state as never };
  if (filter.q === undefined && !readsViews(filter)) {
    const page = await client.sessions.list({ ...state, ...(cursor === undefined ? {} : { cursor }), limit });
    const views = await Promise.all(page.sessions.map((s) => viewOrNull(client, s.sessionId)));
    return { views: views.filter((v): v is SessionView => v !== null), next: page.next, scanned: page.sessions.length };
  }
  const q = filter.q?.toLowerCase();
  const views: SessionView[] = [];
  let next: string | null | undefined = cursor;
  let scanned = 0;
  let read = 0;
  // Walk the index one session at a time past the last one taken, so `next` is exact when the page fills up.
  while (views.length < limit && scanned < SCAN_BUDGET && read < READ_BUDGET) {
    const page = await client.sessions.list({
      ...state,
      ...(next === undefined || next === null ? {} : { cursor: next }),
      limit: Math.min(CHUNK, SCAN_BUDGET - scanned),
    });
    if (page.sessions.length === 0) {
      next = null;
      break;
    }
    const candidates =
      q === undefined ? page.sessions : page.sessions.filter((s) => s.sessionId.toLowerCase().includes(q));
    const found = await Promise.all(candidates.map((s) => viewOrNull(client, s.sessionId)));
    read += found.length;
    const matching = found.filter(
      (v): v is SessionView =>
        v !== null &&
        (filter.agent === undefined || v.agent === filter.agent) &&
        (filter.updatedSince === undefined || v.updatedAt >= filter.updatedSince),
    );
    scanned += page.sessions.length;
    if (views.length + matching.length > limit) {
      // The page fills up inside this chunk: go on after the last one taken (re-read from the index so the cursor is the listing's own).
      const last = matching[limit - views.length - 1] as SessionView;
      views.push(...matching.slice(0, limit - views.length));
      next = await cursorAfter(
        client,
        state,
        next ?? undefined,
        page.sessions.findIndex((s) => s.sessionId === last.sessionId) + 1,
      );
      break;
    }
    views.push(...matching);
    next = page.next;
    if (next === null) break;
  }
  return { views, next: next ?? null, scanned };
}

/** A listed session's view, or null when it was deleted since the listing was read (it is left out). */
async function viewOrNull(client: Client, sessionId: string): Promise<SessionView | null> {
  try {
    return await client.session(sessionId).inspect();
  } catch (error) {
    if (hasErrorCode(error, 'not_found')) return null;
    throw error;
  }
}

/** The listing's cursor after its `count`th entry from `cursor`. */
async function cursorAfter(
  client: Client,
  state: { state?: never },
  cursor: string | undefined,
  count: number,
): Promise<string | null> {
  const page = await client.sessions.list({ ...state, ...(cursor === undefined ? {} : { cursor }), limit: count });
  return page.next;
}
