import { readerParts } from '../runtime/caller/reader-parts.ts';
import type { ListPage } from '../runtime/lifecycle/listing.ts';
import type { WorkerHeartbeat } from '../runtime/caller/types.ts';
import type { SessionView } from '../runtime/inspect.ts';
import { SessionReads } from '../runtime/session-reads.ts';
import { connections, type RedisOption } from './connections.ts';
import type { SessionState, StoredMessage } from './types.ts';
import { watchSession, type WatchOptions } from './watch.ts';

export interface ReaderOptions {
  redis: RedisOption;
  /** The key prefix shared with the workers. @default 'sessiond' */
  prefix?: string;
}

/** Every session, read only: the listing. */
export interface SessionsReader {
  /** A page of sessions, newest first; `next` is the cursor of the next page (null on the last). InputError for a bad cursor. */
  list(options?: { state?: SessionState; cursor?: string; limit?: number }): Promise<ListPage>;
  /** A value that changes whenever anything a listing shows changes (an ETag). */
  listingVersion(): Promise<string>;
}

/**
 * One session, by id, read only. Making a handle reads nothing; each method is one operation.
 * Contract, for every method: a malformed id is an InputError naming `sessionId`; an unknown session
 * a NotFoundError (`code` `not_found`; `watch` throws it on its first step).
 */
export interface SessionReader {
  readonly sessionId: string;
  /** The session's state, latest turn, attempts, history, approvals, usage…: what `sessiond inspect --json` prints. */
  inspect(): Promise<SessionView>;
  /** A page of the message log from seq `from` (default 1), at most `limit` (default 1000); no waiting. */
  messages(options?: { from?: number; limit?: number }): Promise<StoredMessage[]>;
  /** The seq of the last stored message: 0 before the first. */
  lastSeq(): Promise<number>;
  /** The stored messages from `from`, then live ones; ends with the latest turn unless `follow`. */
  watch(options?: WatchOptions): AsyncIterable<StoredMessage>;
}

/** The deployment, read only. */
export interface DeploymentReader {
  /** Reaches Redis; rejects when it cannot. */
  ping(): Promise<void>;
  /** The workers' latest heartbeats (`lastSeen`: epoch ms; one older than a few heartbeats is a dead worker's). */
  workers(): Promise<WorkerHeartbeat[]>;
}

/**
 * A read-only view of a sessiond deployment: the listing and each session's view and messages —
 * the read operations of Client, under the same names. It loads and connects to nothing else (no
 * queue, no agents), so it starts fast: a dashboard, a log shipper, `sessiond inspect`.
 */
export interface Reader {
  sessions: SessionsReader;
  /** A read-only handle on one session (no request is made until a method is called). */
  session(sessionId: string): SessionReader;
  deployment: DeploymentReader;
  /** Closes every connection this reader opened. */
  close(): Promise<void>;
}

/** The read operations of one session over `reads` (a Runtime's, or a reader's of its own). */
export function sessionReader(reads: SessionReads, sessionId: string): SessionReader {
  return {
    sessionId,
    inspect: () => reads.inspect(sessionId),
    // The log holds what the agents yielded, CliMessages (typed at the agent boundary).
    messages: async (o = {}) => (await reads.messagesOf(sessionId, o.from ?? 1, o.limit ?? 1000)) as StoredMessage[],
    lastSeq: () => reads.lastSeqOf(sessionId),
    watch: (o) => watchSession(reads, sessionId, o) as AsyncIterable<StoredMessage>,
  };
}

/** The listing over `reads`. */
export function sessionsReader(reads: SessionReads): SessionsReader {
  return { list: (o = {}) => reads.listPage(o), listingVersion: () => reads.listingVersion() };
}

/** A reader over reads made elsewhere (the CLI's, from its configuration); `close()` closes them, then runs `onClose`. */
export function readerOver(reads: SessionReads, onClose: () => void | Promise<void> = () => undefined): Reader {
  return {
    sessions: sessionsReader(reads),
    session: (sessionId) => sessionReader(reads, sessionId),
    deployment: { ping: () => reads.ping(), workers: () => reads.workers() },
    async close() {
      await reads.close();
      await onClose();
    },
  };
}

/**
 * A read-only client of a sessiond deployment (see Reader): `reader.sessions.list()`,
 * `reader.session(id).inspect()`, `.messages()`, `.watch()`. Connects lazily.
 */
export function createReader(options: ReaderOptions): Reader {
  const { connect, closeAll } = connections(options.redis);
  return readerOver(
    new SessionReads(readerParts({ connect, ...(options.prefix === undefined ? {} : { prefix: options.prefix }) })),
    closeAll,
  );
}
