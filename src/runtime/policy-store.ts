import type { Redis } from 'ioredis';
import type { RetryPolicy, RetryPolicyResult } from '../retry/index.ts';
import type { Keys } from './keys.ts';
import { DEFAULT_RETRY_POLICY, parseRetryPolicy, mergeRetryPolicy } from '../retry/policy.ts';

/** How long a worker trusts its copy of the global policy without a pub/sub invalidation. */
const CACHE_MS = 5_000;

/**
 * The global default retry policy, stored in Redis. Workers read it at each
 * activation (cached briefly, dropped at once on a `policy` event), so a change
 * takes effect without a restart. The policy's schema (zod) is loaded on first use, not by a
 * process that only reads sessions.
 */
export class PolicyStore {
  readonly #redis: Redis;
  readonly #keys: Keys;
  #cached: { policy: RetryPolicy; at: number } | null = null;

  constructor(redis: Redis, keys: Keys) {
    this.#redis = redis;
    this.#keys = keys;
  }

  invalidate(): void {
    this.#cached = null;
  }

  async get(): Promise<RetryPolicy> {
    if (this.#cached !== null && Date.now() - this.#cached.at < CACHE_MS) return this.#cached.policy;
    const raw = await this.#redis.get(this.#keys.policy);
    let policy = DEFAULT_RETRY_POLICY;
    if (raw !== null) {
      const parsed = parseRetryPolicy(safeJson(raw));
      if (parsed.ok) policy = parsed.policy;
    }
    this.#cached = { policy, at: Date.now() };
    return policy;
  }

  /** Validates `patch` over the current policy; on error nothing is written. */
  async update(patch: unknown): Promise<RetryPolicyResult> {
    const result = mergeRetryPolicy(await this.get(), patch);
    if (result.ok) {
      await this.#redis.set(this.#keys.policy, JSON.stringify(result.policy));
      this.invalidate();
    }
    return result;
  }

  async reset(): Promise<RetryPolicy> {
    await this.#redis.del(this.#keys.policy);
    this.invalidate();
    return DEFAULT_RETRY_POLICY;
  }
}

function safeJson(raw: string): unknown {
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    // Not JSON: no stored policy (the default applies).
    return null;
  }
}
