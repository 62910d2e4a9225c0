import type { ListFilter, ListPage } from './lifecycle/listing.ts';
import { MessageHub } from './message-hub.ts';
import type { ReaderParts } from './caller/reader-parts.ts';
import {
  followMessages,
  getSession,
  lastSeq,
  listingVersion,
  listPage,
  readMessages,
  workers,
} from './caller/session-view.ts';
import type { SessionView, WorkerHeartbeat } from './caller/types.ts';
import type { StoredMessage } from './store/session-store.ts';

/**
 * The read operations of the caller side, over ReaderParts alone (no queue, no BullMQ, no policy, no
 * agents): one session's view and message log, live or not, and the listing. Runtime serves its
 * reads through one of these; the public createReader (src/api/reader.ts) is one on its own, which is
 * what keeps `sessiond inspect`, `list` and `watch` from loading the rest of the runtime.
 */
export class SessionReads {
  readonly #parts: ReaderParts;
  #hub: MessageHub | null = null;

  constructor(parts: ReaderParts) {
    this.#parts = parts;
  }

  /** Reaches Redis (a health check, or a client's first contact); rejects when it cannot. */
  ping = async (): Promise<void> => {
    await this.#parts.redis.ping();
  };
  getSession = (sessionId: string): Promise<SessionView | null> => getSession(this.#parts, sessionId);
  lastSeq = (sessionId: string): Promise<number> => lastSeq(this.#parts, sessionId);
  readMessages = (sessionId: string, fromSeq = 1, count = 1000): Promise<StoredMessage[]> =>
    readMessages(this.#parts, sessionId, fromSeq, count);
  followMessages = (sessionId: string, fromSeq: number, signal: AbortSignal): AsyncGenerator<StoredMessage> =>
    followMessages(this.#parts, sessionId, fromSeq, signal);
  listPage = (filter: ListFilter = {}): Promise<ListPage> => listPage(this.#parts, filter);
  listingVersion = (): Promise<string> => listingVersion(this.#parts);
  workers = (): Promise<WorkerHeartbeat[]> => workers(this.#parts);

  /**
   * Live message logs for many followers on one blocking connection (the HTTP
   * event streams): see MessageHub. Made on first use, closed with the reads.
   */
  get messageHub(): MessageHub {
    const { connect, redis, store } = this.#parts;
    this.#hub ??= new MessageHub({
      connect: () => connect('stream-hub'),
      redis,
      logKey: (id) => store.key(id, 'log'),
      existsKey: (id) => store.key(id, 'meta'),
    });
    return this.#hub;
  }

  /** Closes the hub and the command connection. */
  async close(): Promise<void> {
    await this.#hub?.close();
    // A connection already closed (or never connected) has nothing to quit.
    await this.#parts.redis.quit().catch(() => undefined);
  }
}
