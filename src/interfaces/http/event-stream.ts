import type { Context } from 'hono';
import { streamSSE } from 'hono/streaming';
import type { Client } from '../../api/client.ts';
import type { Logger } from '../log.ts';
import type { Principal } from './auth/credentials.ts';
import { hasErrorCode, QuotaError } from '../../errors.ts';
import { HttpError } from './body.ts';

export interface EventStreamOptions {
  client: Client;
  logger: Logger;
  /** Aborting it ends every live stream (server shutdown). */
  signal?: AbortSignal | undefined;
  keepAliveMs: number;
  /** Concurrent streams of this server; one more is a 503 with Retry-After. */
  maxStreams: number;
  /** A stream that sent no message for this long is closed. */
  idleMs: number;
  /** Issue 25: the streams one token may hold at once on this server (null: no cap, no token configured). */
  tokenCap?: (principal: Principal | null) => { name: string; maxStreams: number } | null;
}

/** setTimeout's limit: a credential valid for longer is ended by the idle limit instead. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * `GET /api/sessions/:id/events`: SSE from the client's shared watch
 * (one Redis reader for every stream), bounded: at most `maxStreams` at once,
 * closed after `idleMs` without a message, and when the credential it was
 * opened with (a stream ticket, the login cookie) expires — a client resumes
 * with `Last-Event-ID` and a fresh ticket, losing nothing.
 */
export class EventStreams {
  readonly #o: EventStreamOptions;
  #live = 0;
  /** Live streams per token name (only tokens holding some). */
  readonly #byToken = new Map<string, number>();

  constructor(options: EventStreamOptions) {
    this.#o = options;
  }

  get live(): number {
    return this.#live;
  }

  open(c: Context, sessionId: string, from: number, principal: Principal | null): Response {
    if (this.#live >= this.#o.maxStreams) {
      c.header('Retry-After', '5');
      throw new HttpError(
        503,
        `too many live event streams (http.maxStreams = ${this.#o.maxStreams}); try again shortly`,
      );
    }
    // One token may not take every slot (its cookie and tickets count as the token).
    const cap = this.#o.tokenCap?.(principal) ?? null;
    const held = cap === null ? 0 : (this.#byToken.get(cap.name) ?? 0);
    if (cap !== null && held >= cap.maxStreams) {
      c.header('Retry-After', '5');
      throw new QuotaError(
        'maxStreams',
        cap.maxStreams,
        `the token "${cap.name}" already holds ${held} live event streams on this server (its maxStreams ${cap.maxStreams}): close one first`,
      );
    }
    this.#live += 1;
    if (cap !== null) this.#byToken.set(cap.name, held + 1);
    const { client, logger, keepAliveMs, idleMs } = this.#o;
    const shutdown = this.#o.signal;
    let released = false;
    const release = (): void => {
      if (!released) {
        this.#live -= 1;
        if (cap !== null) {
          const left = (this.#byToken.get(cap.name) ?? 1) - 1;
          if (left > 0) this.#byToken.set(cap.name, left);
          else this.#byToken.delete(cap.name);
        }
      }
      released = true;
    };
    try {
      return streamSSE(
        c,
        async (stream) => {
          const controller = new AbortController();
          const abort = (): void => controller.abort();
          stream.onAbort(abort);
          c.req.raw.signal.addEventListener('abort', abort, { once: true });
          shutdown?.addEventListener('abort', abort, { once: true });
          if (shutdown?.aborted === true) abort();
          let lastMessageAt = Date.now();
          const keepAlive = setInterval(
            () => {
              if (Date.now() - lastMessageAt >= idleMs) abort();
              else stream.write(': keep-alive\n\n').catch(abort);
            },
            Math.min(keepAliveMs, idleMs),
          );
          const left = principal?.expiresAt === undefined ? null : principal.expiresAt - Date.now();
          const expiry = left === null || left > MAX_TIMER_MS ? null : setTimeout(abort, Math.max(0, left));
          try {
            await stream.write('retry: 2000\n\n');
            for await (const m of client
              .session(sessionId)
              .watch({ from, follow: true, shared: true, signal: controller.signal })) {
              await stream.writeSSE({
                id: String(m.seq),
                event: m.type,
                data: JSON.stringify({
                  seq: m.seq,
                  turn: m.turn,
                  attempt: m.attempt,
                  type: m.type,
                  content: m.content,
                }),
              });
              lastMessageAt = Date.now();
              if (stream.aborted || stream.closed) break;
            }
            // The hub ended the stream without an abort: the session is gone (deleted, expired). Say so, so
            // that a client does not reconnect to a 404.
            const gone = await client
              .session(sessionId)
              .inspect()
              .then(
                () => false,
                (error: unknown) => hasErrorCode(error, 'not_found'),
              );
            if (!controller.signal.aborted && !stream.closed && gone) {
              await stream.writeSSE({ event: 'session.deleted', data: JSON.stringify({ sessionId }) });
            }
          } finally {
            clearInterval(keepAlive);
            if (expiry !== null) clearTimeout(expiry);
            abort();
            shutdown?.removeEventListener('abort', abort);
            c.req.raw.signal.removeEventListener('abort', abort);
            release();
          }
        },
        async (error) => {
          release();
          logger.warn({ path: c.req.path, error: error.message }, 'event stream failed');
        },
      );
    } catch (error) {
      release();
      throw error;
    }
  }
}
