import { randomBytes } from 'node:crypto';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { BlockList, LookupFunction } from 'node:net';
import type { Redis } from 'ioredis';
import { WEBHOOK_EVENTS, type Webhook, type WebhookDelivery } from '../../config/webhooks.ts';
import { matchesHost, urlHostPort, type HostPattern } from '../../process/egress/host-pattern.ts';
import type { Keys } from '../keys.ts';
import { script } from '../redis/scripts.ts';
import { webhookField } from '../counters.ts';
import { lifecycleKeys } from '../lifecycle/keys.ts';
import { allowList, webhookDestination } from './destination.ts';
import { outboxKey, webhookFleetKeys, type OutboxHooks } from './outbox-keys.ts';
import { signatureHeader } from './sign.ts';

/**
 * Webhook delivery from the outbox (outbox-keys.ts). A writer records an event in its session's
 * outbox within the fenced write of the transition (outbox-script.ts), after marking the session in
 * the fleet-wide `markers` zset (score: when to look at it). Every worker and `serve` runs a
 * deliverer: it takes the sessions due, claims each one (`SET NX PX`, one deliverer per session
 * at a time; it starts no request later than the claim's end minus a request's timeout), POSTs each
 * due event to the endpoints that subscribe to its type and have not had it, and then removes it,
 * schedules its retry (exponential backoff with jitter) or, past `maxAgeMs`, moves it to the dead
 * letters. Then it sets the marker's score compare-and-set (a writer that marked the session
 * meanwhile wins): to the next retry but at most RECHECK_MS away; once the outbox is empty, to
 * RECHECK_MS away with a `.5` mark, and when it is found empty again then, removed. A write that
 * landed after its session's outbox was seen empty (its marker came before it) is thus delivered
 * at most RECHECK_MS late.
 *
 * An event goes to the session's own webhook it was recorded for: one waiting when that webhook was replaced (or
 * dropped) has it in its `owed` entry (outbox-keys.ts) and is sent there, signed with that webhook's secret; the
 * new one gets only what is recorded after it. The operator's webhooks are this process's configuration: an event
 * goes to those configured when it is delivered (their secrets are kept nowhere else; a rotation lists both).
 * What a deliverer's webhooks take is renewed in `subscriptions` while it runs, each entry for `maxAgeMs`.
 *
 * Bounds: an event stays in the outbox until delivered or dead (`maxAgeMs`); a session holds at most
 * `maxPerSession` waiting events (more are dropped and counted); dead letters are capped at `maxDead`
 * (the oldest go). A dead letter may be recorded twice if its deliverer loses its claim in between.
 */

export const RECHECK_MS = 30_000;
/** Events delivered per session per claim. */
const BATCH = 10;
/** Bytes of a receiver's response read (the rest is dropped). */
const RESPONSE_BYTES = 64 * 1024;

export interface WebhookSettings {
  webhooks: readonly Webhook[];
  delivery: WebhookDelivery;
  /**
   * The hosts a session's own webhook may name (the deployment policy's `webhooks.hosts`), checked again at each
   * delivery: a host the operator removed gets nothing more. Absent or empty: sessions' webhooks get nothing.
   */
  sessionHosts?: readonly HostPattern[];
}

/** Whether a process needs a deliverer: the operator's webhooks, or a policy that lets sessions have their own. */
export function deliversWebhooks(settings: WebhookSettings): boolean {
  return settings.webhooks.length > 0 || (settings.sessionHosts ?? []).length > 0;
}

/** A session's own webhook (its target key, set at enqueue): every event type, under its own secret. */
interface SessionTarget {
  webhook: Webhook;
  /** Its entry in an event's `done` list (apart from an operator endpoint of the same URL). */
  doneKey: string;
  allowed: boolean;
}

type Log = (level: 'info' | 'warn' | 'error', message: string, fields?: Record<string, unknown>) => void;

/** Per-process delivery figures (the metrics registry reads them). */
export class WebhookStats {
  /** Requests by outcome: delivered (2xx), failed (anything else, retried), refused (destination not allowed). */
  readonly requests = { delivered: 0, failed: 0, refused: 0 };
  /** Events by how they left the outbox. */
  readonly events = { delivered: 0, dead: 0 };
  /** Seconds from an event to its delivery (the last endpoint's), of events delivered. */
  readonly lag: number[] = [];
  recordLag(seconds: number): void {
    this.lag.push(seconds);
    if (this.lag.length > 10_000) this.lag.splice(0, this.lag.length - 10_000);
  }
}

interface EventState {
  /** When its first attempt was made (a replayed dead letter starts again from zero). */
  firstAt: number;
  attempts: number;
  done: string[];
  lastError?: string;
}

export interface DeadLetter {
  seq: number;
  deadAt: string;
  sessionId: string;
  id: string;
  type: string;
  attempts: number;
  lastError: string;
  body: string;
}

/** KEYS: claim, outbox, due, state, owed. ARGV: token, id, 'done' | 'retry', state JSON, next due. → 1 | 0 claim lost. */
const SETTLE = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[3] == 'retry' then
  redis.call('HSET', KEYS[4], ARGV[2], ARGV[4])
  redis.call('ZADD', KEYS[3], ARGV[5], ARGV[2])
else
  redis.call('HDEL', KEYS[2], ARGV[2])
  redis.call('HDEL', KEYS[4], ARGV[2])
  redis.call('HDEL', KEYS[5], ARGV[2])
  redis.call('ZREM', KEYS[3], ARGV[2])
end
return 1
`;

/** KEYS: markers. ARGV: sessionId, the score read, new score | 'remove'. → 1 set | 0 a writer marked it meanwhile. */
const REMARK = `
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not s or tonumber(s) ~= tonumber(ARGV[2]) then return 0 end
if ARGV[3] == 'remove' then redis.call('ZREM', KEYS[1], ARGV[1]) else redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1]) end
return 1
`;

/** KEYS: claim. ARGV: token. */
const UNCLAIM = `
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
`;

export class WebhookOutbox implements OutboxHooks {
  readonly #redis: Redis;
  readonly #keys: Keys;
  readonly #settings: WebhookSettings;
  readonly #allowed: BlockList;
  readonly #log: Log;
  readonly #fleet: ReturnType<typeof webhookFleetKeys>;
  readonly #owner = randomBytes(6).toString('hex');
  readonly stats = new WebhookStats();
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | null = null;
  #again = false;
  #closed = false;
  /** When this deliverer last renewed its event types in `subscriptions`. */
  #renewedAt = 0;

  constructor(redis: Redis, keys: Keys, settings: WebhookSettings, log: Log) {
    this.#redis = redis;
    this.#keys = keys;
    this.#settings = settings;
    this.#allowed = allowList(settings.delivery.allowAddresses);
    this.#log = log;
    this.#fleet = webhookFleetKeys(keys);
  }

  get maxPerSession(): number {
    return this.#settings.delivery.maxPerSession;
  }

  get operator(): boolean {
    return this.#settings.webhooks.length > 0;
  }

  async mark(sessionId: string): Promise<void> {
    await this.#redis.zadd(this.#fleet.markers, Date.now(), sessionId);
  }

  wrote(sessionId: string): void {
    this.#redis.zadd(this.#fleet.markers, Date.now(), sessionId).then(
      () => this.poke(),
      // The marker set before the write already has it looked at; this one only makes it sooner.
      () => undefined,
    );
  }

  /** Starts looking for due events every pollMs. */
  start(): void {
    if (this.#timer !== undefined || this.#closed) return;
    // The set that recorded the types for good, before `subscriptions`: what it says may be long out of date.
    this.#redis.del(this.#fleet.subscribed).catch(
      // Left for the next deliverer's start to remove; deletedEvent no longer reads it.
      () => undefined,
    );
    this.#renew();
    this.#timer = setInterval(() => this.poke(), this.#settings.delivery.pollMs);
    this.poke();
  }

  /** A pass now (or right after the one running). */
  poke(): void {
    if (this.#closed) return;
    if (this.#running !== null) {
      this.#again = true;
      return;
    }
    this.#running = this.pass()
      .catch((error: unknown) =>
        this.#log('warn', 'webhook delivery pass failed (tried again)', { error: String(error) }),
      )
      .finally(() => {
        this.#running = null;
        if (this.#again) {
          this.#again = false;
          this.poke();
        }
      });
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#timer);
    await this.#running;
  }

  /**
   * Records until when this deployment's webhooks take each of their event types, where a deleting caller (which
   * reads no webhook configuration) finds whether to record session.deleted (deleted.ts; a session's own webhook
   * always takes it). Renewed while this deliverer runs, each for `maxAgeMs` (the longest an event waits for a
   * deliverer's first attempt before it is dead anyway): once no deliverer takes a type, it lapses and deletions
   * record no more events that no deliverer would send.
   */
  #renew(): void {
    const now = Date.now();
    if (now - this.#renewedAt < RECHECK_MS) return;
    this.#renewedAt = now;
    const types = [...new Set(this.#settings.webhooks.flatMap((w) => w.events))];
    const until = now + Math.max(this.#settings.delivery.maxAgeMs, 3 * RECHECK_MS);
    const tx = this.#redis.multi().zremrangebyscore(this.#fleet.subscriptions, '-inf', now);
    // GT: a deliverer with a longer maxAgeMs is not cut short by this one.
    for (const type of types) tx.zadd(this.#fleet.subscriptions, 'GT', until, type);
    tx.exec().catch((error: unknown) => {
      this.#renewedAt = 0;
      this.#log('warn', 'webhook event types not recorded (session.deleted may not be sent)', { error: String(error) });
    });
  }

  /** One pass over the sessions due (exported for tests and the CLI's replay). */
  async pass(): Promise<void> {
    this.#renew();
    const raw = await this.#redis.zrangebyscore(this.#fleet.markers, '-inf', Date.now(), 'WITHSCORES', 'LIMIT', 0, 64);
    const due: Array<[string, string]> = [];
    for (let i = 0; i + 1 < raw.length; i += 2) due.push([raw[i] as string, raw[i + 1] as string]);
    // A few sessions at once: one slow receiver does not hold up the others.
    for (let i = 0; i < due.length; i += 8)
      await Promise.all(due.slice(i, i + 8).map(([id, score]) => this.#session(id, score)));
  }

  async #session(sessionId: string, seen: string): Promise<void> {
    const k = (part: Parameters<typeof outboxKey>[2]) => outboxKey(this.#keys, sessionId, part);
    const { timeoutMs } = this.#settings.delivery;
    const claimMs = timeoutMs * (BATCH + 2) + 5_000;
    const token = `${this.#owner}:${randomBytes(6).toString('hex')}`;
    if ((await this.#redis.set(k('claim'), token, 'PX', claimMs, 'NX')) !== 'OK') return;
    // No request starts once it could outlast the claim: another deliverer may take the session then.
    const lastStart = Date.now() + claimMs - timeoutMs - 2_000;
    try {
      const ids = await this.#redis.zrangebyscore(k('due'), '-inf', Date.now(), 'LIMIT', 0, BATCH);
      for (const id of ids) {
        if (this.#closed || Date.now() > lastStart) break;
        if (!(await this.#event(sessionId, id, token))) return;
      }
      const next = await this.#redis.zrange(k('due'), 0, 0, 'WITHSCORES');
      const now = Date.now();
      const score =
        next.length >= 2
          ? String(Math.min(Number(next[1]), now + RECHECK_MS))
          : seen.endsWith('.5')
            ? 'remove'
            : `${now + RECHECK_MS}.5`;
      await script(this.#redis, 'sessiondWebhookRemark', REMARK, 1)(this.#fleet.markers, sessionId, seen, score);
    } finally {
      await script(this.#redis, 'sessiondWebhookUnclaim', UNCLAIM, 1)(k('claim'), token);
    }
  }

  /**
   * The session's own webhook an event is owed: the one recorded for it when the target was replaced or dropped
   * (`owed`), else the session's (its secret is read here only, never logged).
   */
  #target(owed: string | null, current: Record<string, string>): SessionTarget | null {
    let raw: { url?: unknown; secret?: unknown } = current;
    if (owed === 'none') return null;
    if (owed !== null) {
      try {
        raw = JSON.parse(owed) as typeof raw;
      } catch {
        // Written by ENQUEUE with cjson, so JSON; anything else is owed to no webhook.
        return null;
      }
    }
    if (typeof raw.url !== 'string' || typeof raw.secret !== 'string') return null;
    let allowed = false;
    try {
      const { host, port } = urlHostPort(new URL(raw.url));
      allowed = (this.#settings.sessionHosts ?? []).some((p) => matchesHost(p, host, port));
    } catch {
      // Checked at enqueue, so a URL; anything else is not allowed (refused like a host the policy dropped).
    }
    return {
      webhook: { url: raw.url, secret: raw.secret, events: [...WEBHOOK_EVENTS] },
      doneKey: `session:${raw.url}`,
      allowed,
    };
  }

  /** Delivers one event to the endpoints still owed it; false: the claim was lost (stop). */
  async #event(sessionId: string, id: string, token: string): Promise<boolean> {
    const k = (part: Parameters<typeof outboxKey>[2]) => outboxKey(this.#keys, sessionId, part);
    // Read together: the event's owed entry and the session's webhook as one moment has them (ENQUEUE sets both).
    const read = await this.#redis
      .multi()
      .hget(k('outbox'), id)
      .hget(k('state'), id)
      .hget(k('owed'), id)
      .hgetall(k('target'))
      .exec();
    if (read === null) throw new Error(`webhook event ${id} of ${sessionId} not read (the transaction was aborted)`);
    for (const [error] of read) if (error !== null) throw error;
    const [body, stateRaw, owedTo] = read.slice(0, 3).map(([, value]) => (value ?? null) as string | null) as [
      string | null,
      string | null,
      string | null,
    ];
    const target = this.#target(owedTo, read[3]?.[1] as Record<string, string>);
    const settle = (mode: 'done' | 'retry', state = '', nextAt = 0) =>
      script(this.#redis, 'sessiondWebhookSettle', SETTLE, 5)(
        k('claim'),
        k('outbox'),
        k('due'),
        k('state'),
        k('owed'),
        token,
        id,
        mode,
        state,
        nextAt,
      ).then((r) => Number(r) === 1);
    if (body === null) return settle('done');
    const state: EventState =
      stateRaw === null ? { firstAt: Date.now(), attempts: 0, done: [] } : (JSON.parse(stateRaw) as EventState);
    const event = parseBody(body);
    const owed = this.#settings.webhooks.filter(
      (w) => (w.events as readonly string[]).includes(event.type) && !state.done.includes(w.url),
    );
    const errors: string[] = [];
    const own = target !== null && event.type !== '' && !state.done.includes(target.doneKey) ? target : null;
    if (Buffer.byteLength(body) > this.#settings.delivery.maxBytes)
      errors.push(`body of ${Buffer.byteLength(body)} bytes is over webhookDelivery.maxBytes`);
    else {
      for (const webhook of owed) {
        const result = await this.#post(webhook, id, body);
        if (result === null) state.done.push(webhook.url);
        else errors.push(`${new URL(webhook.url).host}: ${result}`);
      }
      if (own !== null) {
        const result = own.allowed
          ? await this.#post(own.webhook, id, body)
          : this.#refused('its host is not in policy.webhooks.hosts any more');
        if (result === null) state.done.push(own.doneKey);
        else errors.push(`session webhook ${new URL(own.webhook.url).host}: ${result}`);
      }
    }
    state.attempts += 1;
    const ageMs = Date.now() - event.at;
    if (errors.length === 0) {
      this.stats.events.delivered += 1;
      this.stats.recordLag(Math.max(0, ageMs) / 1000);
      return settle('done');
    }
    state.lastError = errors.join('; ').slice(0, 1000);
    const tooLarge = Buffer.byteLength(body) > this.#settings.delivery.maxBytes;
    if (tooLarge || Date.now() - state.firstAt > this.#settings.delivery.maxAgeMs) {
      await this.#dead(sessionId, id, event.type, body, state);
      return settle('done');
    }
    const { retryBaseMs, retryMaxMs } = this.#settings.delivery;
    const delay = Math.min(retryMaxMs, retryBaseMs * 2 ** Math.min(30, state.attempts - 1));
    // Jitter: receivers coming back are not hit by every deliverer at once.
    const nextAt = Date.now() + Math.round(delay * (0.5 + Math.random() * 0.5));
    return settle('retry', JSON.stringify(state), nextAt);
  }

  async #dead(sessionId: string, id: string, type: string, body: string, state: EventState): Promise<void> {
    const seq = await this.#redis.incr(this.#fleet.deadSeq);
    const letter: DeadLetter = {
      seq,
      deadAt: new Date().toISOString(),
      sessionId,
      id,
      type,
      attempts: state.attempts,
      lastError: state.lastError ?? '',
      body,
    };
    await this.#redis
      .multi()
      .lpush(this.#fleet.dead, JSON.stringify(letter))
      .ltrim(this.#fleet.dead, 0, this.#settings.delivery.maxDead - 1)
      .exec();
    this.stats.events.dead += 1;
    this.#count('dead');
    this.#log('warn', 'webhook event dead-lettered', { sessionId, id, type, attempts: state.attempts, seq });
  }

  /** Adds to the fleet totals that serve's metrics report (counters.ts). */
  #count(outcome: 'delivered' | 'failed' | 'refused' | 'dead'): void {
    this.#redis.hincrby(lifecycleKeys(this.#keys).counters, webhookField(outcome), 1).catch(
      // A count lost to a Redis hiccup only under-reports a metric; delivery does not depend on it.
      () => undefined,
    );
  }

  #refused(reason: string): string {
    this.stats.requests.refused += 1;
    this.#count('refused');
    return `refused: ${reason}`;
  }

  /** One signed POST; null when the receiver answered 2xx, else why not. Never throws. */
  async #post(webhook: Webhook, id: string, body: string): Promise<string | null> {
    const url = new URL(webhook.url);
    const dest = await webhookDestination(url.hostname, this.#allowed);
    if (!dest.ok) return this.#refused(dest.reason);
    const timestamp = Math.floor(Date.now() / 1000);
    const secrets = typeof webhook.secret === 'string' ? [webhook.secret] : webhook.secret;
    // The connection goes to the address checked above, whatever a second lookup would say.
    const lookup: LookupFunction = (_host, options, callback) => {
      if (options.all === true) (callback as unknown as (e: null, a: object[]) => void)(null, [dest]);
      else callback(null, dest.address, dest.family);
    };
    const result = await new Promise<string | null>((resolve) => {
      const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
      const req = send(url, {
        method: 'POST',
        lookup,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          'user-agent': 'sessiond-webhooks',
          'webhook-id': id,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': signatureHeader(secrets, id, timestamp, body),
        },
      });
      const timer = setTimeout(
        () => req.destroy(new Error(`no answer within ${this.#settings.delivery.timeoutMs} ms`)),
        this.#settings.delivery.timeoutMs,
      );
      req.on('error', (error) => {
        clearTimeout(timer);
        resolve(error.message);
      });
      req.on('response', (res: IncomingMessage) => {
        let read = 0;
        res.on('data', (chunk: Buffer) => {
          read += chunk.length;
          // The answer's body is not used: read a little, then drop the connection.
          if (read > RESPONSE_BYTES) res.destroy();
        });
        const done = () => {
          clearTimeout(timer);
          const status = res.statusCode ?? 0;
          resolve(status >= 200 && status < 300 ? null : `HTTP ${status}`);
        };
        res.on('end', done);
        res.on('close', done);
      });
      req.end(body);
    });
    if (result === null) this.stats.requests.delivered += 1;
    else this.stats.requests.failed += 1;
    this.#count(result === null ? 'delivered' : 'failed');
    return result;
  }
}

function parseBody(body: string): { type: string; at: number } {
  try {
    const parsed = JSON.parse(body) as { type?: unknown; at?: unknown };
    const at = typeof parsed.at === 'string' ? Date.parse(parsed.at) : NaN;
    return { type: typeof parsed.type === 'string' ? parsed.type : '', at: Number.isNaN(at) ? Date.now() : at };
  } catch {
    // Written by sessiond, so JSON; anything else goes nowhere (no endpoint subscribes to type '').
    return { type: '', at: Date.now() };
  }
}

/** The dead letters kept, and how long the most overdue session with events due has waited (s). */
export async function webhookBacklog(
  redis: Redis,
  keys: Keys,
  now: number,
): Promise<{ dead: number; lagSeconds: number }> {
  const fleet = webhookFleetKeys(keys);
  const [dead, oldest] = await Promise.all([
    redis.llen(fleet.dead),
    redis.zrangebyscore(fleet.markers, '-inf', now, 'WITHSCORES', 'LIMIT', 0, 1),
  ]);
  const due = oldest.length >= 2 ? Number(oldest[1]) : now;
  return { dead, lagSeconds: Math.max(0, now - due) / 1000 };
}

/** The events waiting, per session (at most `limit` sessions). */
export async function pendingWebhooks(
  redis: Redis,
  keys: Keys,
  limit = 100,
): Promise<Array<{ sessionId: string; waiting: number; nextAt: number | null }>> {
  const ids = await redis.zrange(webhookFleetKeys(keys).markers, 0, limit - 1);
  const out = [];
  for (const sessionId of ids) {
    const due = outboxKey(keys, sessionId, 'due');
    const [waiting, next] = await Promise.all([redis.zcard(due), redis.zrange(due, 0, 0, 'WITHSCORES')]);
    if (waiting > 0) out.push({ sessionId, waiting, nextAt: next.length >= 2 ? Number(next[1]) : null });
  }
  return out;
}

/** `since`: a dead letter's seq (those from it on) or a time (those dead since then). */
export type Since = { seq: number } | { at: number };

export function parseSince(text: string): Since | null {
  if (/^\d+$/.test(text)) return { seq: Number(text) };
  const at = Date.parse(text);
  return Number.isNaN(at) ? null : { at };
}

export async function deadLetters(redis: Redis, keys: Keys, since?: Since): Promise<DeadLetter[]> {
  const raw = await redis.lrange(webhookFleetKeys(keys).dead, 0, -1);
  return raw
    .map((r) => JSON.parse(r) as DeadLetter)
    .filter((d) => since === undefined || ('seq' in since ? d.seq >= since.seq : Date.parse(d.deadAt) >= since.at))
    .reverse();
}

/** Puts dead letters back in their sessions' outboxes (same webhook-id, attempts from zero); → how many. */
export async function replayDeadLetters(redis: Redis, keys: Keys, since: Since): Promise<number> {
  const fleet = webhookFleetKeys(keys);
  const raw = await redis.lrange(fleet.dead, 0, -1);
  let replayed = 0;
  for (const entry of raw) {
    const d = JSON.parse(entry) as DeadLetter;
    if ('seq' in since ? d.seq < since.seq : Date.parse(d.deadAt) < since.at) continue;
    const now = Date.now();
    await redis.zadd(fleet.markers, now, d.sessionId);
    await redis
      .multi()
      .hset(outboxKey(keys, d.sessionId, 'outbox'), d.id, d.body)
      .hdel(outboxKey(keys, d.sessionId, 'state'), d.id)
      // Replayed to the session's webhook of now, as to the operator's of now.
      .hdel(outboxKey(keys, d.sessionId, 'owed'), d.id)
      .zadd(outboxKey(keys, d.sessionId, 'due'), now, d.id)
      .exec();
    await redis.lrem(fleet.dead, 1, entry);
    replayed += 1;
  }
  return replayed;
}
