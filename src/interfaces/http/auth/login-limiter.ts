/** Failed logins one client address may make at once before it must wait. */
export const LOGIN_BURST = 10;
/** Then one more failed login per this many ms (6 per minute). */
export const LOGIN_REFILL_MS = 10_000;
/** Client addresses remembered at most; the one seen least recently is forgotten first. */
export const MAX_LOGIN_CLIENTS = 10_000;

/**
 * Login attempts per client address: a token bucket of LOGIN_BURST failures, refilled one per
 * LOGIN_REFILL_MS. A failed login takes one; an empty bucket refuses every login from that
 * address (the right token too: nothing is learnt from trying) until it refills. Bounded memory: at
 * most MAX_LOGIN_CLIENTS addresses, the least recently seen evicted first (a flood of addresses
 * costs an attacker its own history, never memory). Behind a proxy every client shares the proxy's
 * address: the limit is then the proxy's.
 */
export class LoginLimiter {
  readonly #buckets = new Map<string, { tokens: number; at: number }>();
  readonly #burst: number;
  readonly #refillMs: number;
  readonly #max: number;

  constructor(options: { burst?: number; refillMs?: number; maxClients?: number } = {}) {
    this.#burst = options.burst ?? LOGIN_BURST;
    this.#refillMs = options.refillMs ?? LOGIN_REFILL_MS;
    this.#max = options.maxClients ?? MAX_LOGIN_CLIENTS;
  }

  /** May this address try a login now? If not, how many seconds until it may (Retry-After). */
  check(client: string | null, now = Date.now()): { ok: true } | { ok: false; retryAfterS: number } {
    const bucket = this.#refilled(client ?? 'unknown', now);
    if (bucket.tokens >= 1) return { ok: true };
    return { ok: false, retryAfterS: Math.max(1, Math.ceil((this.#refillMs - (now - bucket.at)) / 1000)) };
  }

  /** A failed login from this address. */
  failed(client: string | null, now = Date.now()): void {
    const key = client ?? 'unknown';
    const bucket = this.#refilled(key, now);
    bucket.tokens = Math.max(0, bucket.tokens - 1);
    this.#buckets.delete(key);
    this.#buckets.set(key, bucket);
    while (this.#buckets.size > this.#max) this.#buckets.delete(this.#buckets.keys().next().value as string);
  }

  get size(): number {
    return this.#buckets.size;
  }

  #refilled(key: string, now: number): { tokens: number; at: number } {
    const bucket = this.#buckets.get(key);
    if (bucket === undefined) return { tokens: this.#burst, at: now };
    const earned = Math.floor((now - bucket.at) / this.#refillMs);
    if (earned > 0) {
      bucket.tokens = Math.min(this.#burst, bucket.tokens + earned);
      bucket.at = bucket.tokens === this.#burst ? now : bucket.at + earned * this.#refillMs;
    }
    return bucket;
  }
}
