import { isSettled, summarize } from '../runtime/inspect.ts';
import { LiveWorkerCheck, type NoLiveWorkerNotice } from '../runtime/live-workers.ts';
import type { SessionReads } from '../runtime/session-reads.ts';
import type { StoredMessage } from '../runtime/store/session-store.ts';

export type { NoLiveWorkerNotice };

export interface WatchOptions {
  /** The first seq to yield (default 1): resume after the last one you saw with `from: seq + 1`. */
  from?: number;
  /** Keep following later turns until `signal` aborts (default: end once the latest turn has ended and nothing waits). */
  follow?: boolean;
  /** Ends the iteration (no error) when aborted. */
  signal?: AbortSignal;
  /**
   * Read live messages through the client's one shared blocking connection, as many concurrent watchers
   * (the HTTP event streams) do, instead of a connection of its own. A shared watcher that falls far
   * behind is ended (resume with `from: lastSeq + 1`); it also ends once the session is gone.
   */
  shared?: boolean;
  /**
   * Told once while the latest turn has not ended and no worker has sent a heartbeat in the liveness window
   * (none can take the turn); the watch keeps waiting. Told again only after a live worker was seen meanwhile.
   * What it throws is ignored.
   */
  onNoLiveWorker?: (notice: NoLiveWorkerNotice) => void;
}

const SETTLED_POLL_MS = 200;
/** How often a `follow` watch with `onNoLiveWorker` reads the session (it needs no settled check). */
const FOLLOW_POLL_MS = 1_000;

/**
 * A session's stored messages from `from` on, then live ones as they are written. Contract: NotFoundError
 * (on the first `next()`) for an unknown session; no gap and no duplicate (each seq once, in order); without
 * `follow` it ends once every message of the latest turn is yielded and that turn has ended with nothing
 * waiting, or when the session is deleted (with `follow` too when `onNoLiveWorker` is given); it always ends
 * when `signal` aborts. Breaking out of the loop
 * closes its Redis connection.
 */
export async function* watchSession(
  reads: Pick<SessionReads, 'getSession' | 'followMessages' | 'messageHub' | 'mustExist' | 'workers'>,
  sessionId: string,
  options: WatchOptions = {},
): AsyncGenerator<StoredMessage> {
  await reads.mustExist(sessionId);
  const onNoLiveWorker = options.onNoLiveWorker;
  const liveness = onNoLiveWorker === undefined ? null : new LiveWorkerCheck(() => reads.workers());
  const reader = new AbortController();
  const stop = (): void => reader.abort();
  options.signal?.addEventListener('abort', stop, { once: true });
  if (options.signal?.aborted === true) reader.abort();
  let yielded = Math.max(1, options.from ?? 1) - 1;
  const follow = options.follow === true;
  const watcher =
    follow && liveness === null
      ? Promise.resolve()
      : (async () => {
          while (!reader.signal.aborted) {
            const record = await reads.getSession(sessionId);
            // Deleted (or expired) while watched: nothing more will come.
            if (record === null) {
              reader.abort();
              return;
            }
            const view = summarize(record);
            const notice = await liveness?.check(view);
            if (notice != null && !reader.signal.aborted) {
              try {
                onNoLiveWorker?.(notice);
              } catch {
                // The listener's own failure is not the watch's: it goes on, as documented on the option.
              }
            }
            if (!follow && yielded >= view.lastSeq && isSettled(view)) {
              reader.abort();
              return;
            }
            await new Promise((resolve) => setTimeout(resolve, follow ? FOLLOW_POLL_MS : SETTLED_POLL_MS));
          }
        })();
  try {
    const source =
      options.shared === true
        ? reads.messageHub.follow(sessionId, yielded + 1, reader.signal)
        : reads.followMessages(sessionId, yielded + 1, reader.signal);
    for await (const message of source) {
      yield message;
      yielded = message.seq;
    }
  } finally {
    reader.abort();
    options.signal?.removeEventListener('abort', stop);
    // The watcher's own errors reached the caller through the iterator already; this only waits for it to end.
    await watcher.catch(() => undefined);
  }
}
