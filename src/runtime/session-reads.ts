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
import type { SessionRecord, WorkerHeartbeat } from './caller/types.ts';
import { checkSessionId } from './caller/reader-parts.ts';
import { summarize, type SessionView } from './inspect.ts';
import type { StoredMessage } from './store/session-store.ts';
import { NotFoundError } from '../errors.ts';

/** The one error for an operation on a session that does not exist (the HTTP API's 404, the CLI's exit 3). */
export function unknownSession(sessionId: string): NotFoundError {
  return new NotFoundError(`unknown session "${sessionId}"`);
}

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
  /** The stored session, raw; null for an unknown or malformed id (sessiond's own surfaces; callers use `inspect`). */
  getSession = (sessionId: string): Promise<SessionRecord | null> => getSession(this.#parts, sessionId);
  /** The session as `inspect --json` prints it. InputError for a malformed id, NotFoundError for an unknown one. */
  inspect = async (sessionId: string): Promise<SessionView> => {
    checkSessionId(sessionId);
    const record = await getSession(this.#parts, sessionId);
    if (record === null) throw unknownSession(sessionId);
    return summarize(record);
  };
  /** Throws NotFoundError unless the session exists (InputError for a malformed id). */
  mustExist = async (sessionId: string): Promise<void> => {
    checkSessionId(sessionId);
    if ((await this.#parts.redis.exists(this.#parts.store.key(sessionId, 'meta'))) === 0)
      throw unknownSession(sessionId);
  };
  /** 0 before the first message, and for an unknown session (sessiond's own surfaces; callers use `lastSeqOf`). */
  lastSeq = (sessionId: string): Promise<number> => lastSeq(this.#parts, sessionId);
  /** A page of the log; empty for an unknown session (sessiond's own surfaces; callers use `messagesOf`). */
  readMessages = (sessionId: string, fromSeq = 1, count = 1000): Promise<StoredMessage[]> =>
    readMessages(this.#parts, sessionId, fromSeq, count);
  // An empty log is the only answer an unknown session could give: only then is its existence asked.
  /** As lastSeq, but NotFoundError for an unknown session. */
  lastSeqOf = async (sessionId: string): Promise<number> => {
    const seq = await lastSeq(this.#parts, sessionId);
    if (seq === 0) await this.mustExist(sessionId);
    return seq;
  };
  /** As readMessages, but NotFoundError for an unknown session. */
  messagesOf = async (sessionId: string, fromSeq = 1, count = 1000): Promise<StoredMessage[]> => {
    const page = await readMessages(this.#parts, sessionId, fromSeq, count);
    if (page.length === 0) await this.mustExist(sessionId);
    return page;
  };
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
