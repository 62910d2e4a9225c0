import type { Redis } from 'ioredis';
import { isCluster } from './redis/connection.ts';
import { parseEntry, type StoredMessage } from './store/session-store.ts';

export interface MessageHubOptions {
  /** Opens the hub's one blocking connection (made on the first follower). */
  connect: () => Redis;
  /** A non-blocking connection: history reads and CLIENT UNBLOCK. */
  redis: Redis;
  /** The message log (stream) key of a session. */
  logKey: (sessionId: string) => string;
  /** A follower still this many messages behind when the next ones arrive is dropped (a client resumes from its last seq). Default 2000. */
  maxQueued?: number;
  /** XREAD BLOCK timeout (ms). Default 1000. */
  blockMs?: number;
  /** A key that exists as long as the session does (its meta): the followers of a deleted or expired session are ended. */
  existsKey?: (sessionId: string) => string;
  /** How often the followed sessions are checked for having gone (ms). Default 5000. */
  goneCheckMs?: number;
  /** On a Redis Cluster: the pause between two read rounds that found nothing new (ms). Default 50. */
  clusterPollMs?: number;
}

interface Follower {
  sessionId: string;
  /** The next seq it wants. */
  next: number;
  queue: StoredMessage[];
  /** Set when the hub drops it (too slow) or closes. */
  ended: boolean;
  wake: (() => void) | null;
}

const PAGE = 500;

/**
 * Live message logs for many followers over one blocking Redis connection:
 * one `XREAD BLOCK … STREAMS <every followed log>` loop fans each new entry out
 * to the followers of its session. A follower first reads its history on the
 * shared non-blocking connection, then joins; the loop reads each log from the
 * lowest seq its followers want, so nothing written in between is missed, and
 * each follower skips what it already has (no gap, no duplicate).
 *
 * Contract: Redis connections stay at one blocking reader whatever the number
 * of followers; a follower still `maxQueued` messages behind at the next read is ended
 * (its stream ends; a client resumes with its last seq); close() ends all.
 *
 * On a Redis Cluster every session's log is in a slot of its own and Redis refuses an XREAD over
 * two slots (CROSSSLOT), so one blocking read cannot cover them: there a round is one non-blocking
 * XREAD per followed log on the shared connection (routed to each log's master), and a round that
 * found nothing waits `clusterPollMs` (or until a follower joins). No extra connection, at the
 * price of a read per followed log per round while nothing happens.
 */
export class MessageHub {
  readonly #options: Required<Omit<MessageHubOptions, 'connect' | 'redis' | 'logKey' | 'existsKey'>> &
    MessageHubOptions;
  readonly #bySession = new Map<string, Set<Follower>>();
  #reader: Redis | null = null;
  #readerId: number | null = null;
  #loop: Promise<void> | null = null;
  #blockingOn: Set<string> | null = null;
  #idle: (() => void) | null = null;
  #closed = false;
  #goneTimer: NodeJS.Timeout | null = null;

  constructor(options: MessageHubOptions) {
    this.#options = { maxQueued: 2000, blockMs: 1000, goneCheckMs: 5000, clusterPollMs: 50, ...options };
    this.#cluster = isCluster(options.redis);
  }

  readonly #cluster: boolean;
  #pollWake: (() => void) | null = null;

  /** Followers now (each live event stream is one). */
  get followers(): number {
    let n = 0;
    for (const set of this.#bySession.values()) n += set.size;
    return n;
  }

  /** Every message of `sessionId` from `fromSeq` on, then new ones as they are written, until `signal` aborts (or the hub drops or closes it). */
  async *follow(sessionId: string, fromSeq: number, signal: AbortSignal): AsyncGenerator<StoredMessage> {
    let next = Math.max(1, fromSeq);
    // History on the shared connection, page by page.
    for (;;) {
      if (signal.aborted || this.#closed) return;
      const entries = await this.#options.redis.xrange(
        this.#options.logKey(sessionId),
        `${next}-0`,
        '+',
        'COUNT',
        PAGE,
      );
      for (const [, fields] of entries) {
        const message = parseEntry(fields);
        if (message.seq < next) continue;
        next = message.seq + 1;
        yield message;
        if (signal.aborted) return;
      }
      if (entries.length < PAGE) break;
    }
    const follower: Follower = { sessionId, next, queue: [], ended: false, wake: null };
    const wake = (): void => follower.wake?.();
    signal.addEventListener('abort', wake, { once: true });
    this.#join(follower);
    try {
      while (!signal.aborted && !follower.ended) {
        const message = follower.queue.shift();
        if (message !== undefined) {
          yield message;
          continue;
        }
        await new Promise<void>((resolve) => {
          follower.wake = resolve;
        });
        follower.wake = null;
      }
    } finally {
      signal.removeEventListener('abort', wake);
      this.#leave(follower);
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#goneTimer !== null) clearInterval(this.#goneTimer);
    this.#goneTimer = null;
    for (const set of this.#bySession.values()) for (const f of set) this.#end(f);
    this.#bySession.clear();
    this.#idle?.();
    this.#pollWake?.();
    this.#reader?.disconnect();
    // Closing: the loop's errors were handed to its followers already.
    await this.#loop?.catch(() => undefined);
    this.#reader = null;
  }

  #join(follower: Follower): void {
    let set = this.#bySession.get(follower.sessionId);
    const fresh = set === undefined;
    if (set === undefined) {
      set = new Set();
      this.#bySession.set(follower.sessionId, set);
    }
    set.add(follower);
    if (this.#options.existsKey !== undefined && this.#goneTimer === null) {
      this.#goneTimer = setInterval(() => void this.#endGone(), this.#options.goneCheckMs);
      this.#goneTimer.unref();
    }
    this.#loop ??= this.#run().finally(() => {
      this.#loop = null;
    });
    this.#idle?.();
    this.#pollWake?.();
    // A blocking XREAD that does not name this session's log: have it return now (as a timeout) so the next one does.
    if (fresh && this.#blockingOn !== null && !this.#blockingOn.has(follower.sessionId) && this.#readerId !== null) {
      // A hint to stop blocking now: the read times out by itself.
      this.#options.redis.client('UNBLOCK', this.#readerId, 'TIMEOUT').catch(() => undefined);
    }
  }

  #leave(follower: Follower): void {
    const set = this.#bySession.get(follower.sessionId);
    set?.delete(follower);
    if (set !== undefined && set.size === 0) this.#bySession.delete(follower.sessionId);
    follower.queue.length = 0;
    if (this.#bySession.size === 0 && this.#goneTimer !== null) {
      clearInterval(this.#goneTimer);
      this.#goneTimer = null;
    }
  }

  /** Ends the followers of sessions that no longer exist (deleted, expired): their logs will never grow again. */
  async #endGone(): Promise<void> {
    const existsKey = this.#options.existsKey;
    if (existsKey === undefined) return;
    const sessions = [...this.#bySession.keys()];
    // One call per session (not one pipeline): on a Redis Cluster their keys are in different slots.
    const exists = await Promise.all(sessions.map((s) => this.#options.redis.exists(existsKey(s)).catch(() => 1)));
    sessions.forEach((s, i) => {
      if (exists[i] === 0) for (const f of this.#bySession.get(s) ?? []) this.#end(f);
    });
  }

  #end(follower: Follower): void {
    follower.ended = true;
    follower.queue.length = 0;
    follower.wake?.();
  }

  async #readerReady(): Promise<Redis> {
    if (this.#reader === null) {
      const reader = this.#options.connect();
      this.#reader = reader;
      // The id changes with each reconnect: CLIENT UNBLOCK needs the current one.
      reader.on('ready', () => {
        reader.client('ID').then(
          (id) => (this.#readerId = Number(id)),
          // No id: the reader is not unblocked early, its reads time out by themselves.
          () => (this.#readerId = null),
        );
      });
      this.#readerId = Number(await reader.client('ID'));
    }
    return this.#reader;
  }

  /** One read round on a cluster: each log on its own (see the class comment); null when nothing new came. */
  async #clusterRound(keys: string[], ids: string[]): Promise<Array<[string, Array<[string, string[]]>]> | null> {
    const replies = await Promise.all(
      keys.map((key, i) =>
        (
          this.#options.redis.xread('COUNT', PAGE, 'STREAMS', key, ids[i] as string) as Promise<Array<
            [string, Array<[string, string[]]>]
          > | null>
        ).catch(
          // A stream not readable now is read again on the next round.
          () => null,
        ),
      ),
    );
    const reply = replies.flatMap((r) => r ?? []);
    if (reply.length > 0 || this.#closed) return reply;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, this.#options.clusterPollMs);
      this.#pollWake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.#pollWake = null;
    return null;
  }

  async #run(): Promise<void> {
    while (!this.#closed) {
      if (this.#bySession.size === 0) {
        await new Promise<void>((resolve) => {
          this.#idle = resolve;
        });
        this.#idle = null;
        continue;
      }
      const sessions = [...this.#bySession.keys()];
      const keys = sessions.map(this.#options.logKey);
      const sessionOf = new Map(keys.map((k, i) => [k, sessions[i] as string]));
      // Each log is read from the lowest seq its followers want; `from` remembers it for the fan-out.
      const from = new Map<string, number>();
      const ids = sessions.map((s) => {
        let lowest = Number.POSITIVE_INFINITY;
        for (const f of this.#bySession.get(s) ?? []) if (!f.ended && f.next < lowest) lowest = f.next;
        from.set(s, lowest);
        return Number.isFinite(lowest) ? `${lowest - 1}-0` : '$';
      });
      let reply: Array<[string, Array<[string, string[]]>]> | null;
      if (this.#cluster) {
        reply = await this.#clusterRound(keys, ids);
      } else {
        try {
          const reader = await this.#readerReady();
          this.#blockingOn = new Set(sessions);
          reply = (await reader.xread(
            'COUNT',
            PAGE,
            'BLOCK',
            this.#options.blockMs,
            'STREAMS',
            ...keys,
            ...ids,
          )) as typeof reply;
        } catch {
          if (this.#closed) return;
          // Redis away: ioredis reconnects; try again shortly.
          await new Promise((resolve) => setTimeout(resolve, 250));
          continue;
        } finally {
          this.#blockingOn = null;
        }
      }
      if (reply === null) continue;
      // Redis answers only for the logs that had entries, each under its key.
      for (const [key, entries] of reply) {
        const session = sessionOf.get(key) ?? '';
        const set = this.#bySession.get(session);
        if (set === undefined) continue;
        const readFrom = from.get(session) ?? Number.POSITIVE_INFINITY;
        // Still maxQueued behind since the last read: it is not keeping up (its queue holds at most maxQueued + one page).
        for (const follower of set) if (follower.queue.length >= this.#options.maxQueued) this.#end(follower);
        for (const [, fields] of entries) {
          const message = parseEntry(fields);
          for (const follower of set) {
            // A follower that joined during this read wanting earlier seqs than it covers waits for the next read (no gap).
            if (follower.ended || message.seq < follower.next || follower.next < readFrom) continue;
            follower.next = message.seq + 1;
            follower.queue.push(message);
            follower.wake?.();
          }
        }
      }
    }
  }
}
