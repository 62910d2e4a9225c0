import { isSettled, summarize } from '../runtime/inspect.ts';
import type { SessionReads } from '../runtime/session-reads.ts';
import type { StoredMessage } from '../runtime/store/session-store.ts';

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
}

const SETTLED_POLL_MS = 200;

/**
 * A session's stored messages from `from` on, then live ones as they are written. Contract: no gap
 * and no duplicate (each seq once, in order); without `follow` it ends once every message of the
 * latest turn is yielded and that turn has ended with nothing waiting; it always ends when `signal`
 * aborts. Breaking out of the loop closes its Redis connection.
 */
export async function* watchSession(
  reads: Pick<SessionReads, 'getSession' | 'followMessages' | 'messageHub'>,
  sessionId: string,
  options: WatchOptions = {},
): AsyncGenerator<StoredMessage> {
  const reader = new AbortController();
  const stop = (): void => reader.abort();
  options.signal?.addEventListener('abort', stop, { once: true });
  if (options.signal?.aborted === true) reader.abort();
  let yielded = Math.max(1, options.from ?? 1) - 1;
  const watcher =
    options.follow === true
      ? Promise.resolve()
      : (async () => {
          while (!reader.signal.aborted) {
            const view = await reads.getSession(sessionId);
            if (view !== null && yielded >= view.lastSeq && isSettled(summarize(view))) {
              reader.abort();
              return;
            }
            await new Promise((resolve) => setTimeout(resolve, SETTLED_POLL_MS));
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
