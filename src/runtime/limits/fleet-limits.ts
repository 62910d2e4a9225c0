import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { WaitingFor } from '../../../machines/types.ts';
import { limitKeysFor, type LimitKey, type LimitRule, type MatchValues } from './match.ts';
import { ACQUIRE, FORGET, RELEASE, RENEW, WAKE } from './scripts.ts';

/** The fleet's own limit key: no caps, only paused dispatch (`sessiond pause`). */
const FLEET: LimitKey = { name: '*', key: '*', maxConcurrent: 0, maxStartsPerMinute: 0, maxTokensPerMinute: 0 };

export interface Hold {
  id: string;
  keys: LimitKey[];
}

export type Admission = { ok: true; hold: Hold } | { ok: false; waitingFor: Omit<WaitingFor, 'since'> };

export interface LimitStatus {
  name: string;
  key: string;
  inUse: number;
  waiting: number;
  cooldownUntil: number | null;
  paused: boolean;
}

/**
 * Fleet-wide limits in Redis. Contract: an attempt runs only with a hold on every limit key it falls
 * under, taken in one script (all or nothing); a hold is a lease (`holdTtlMs`) renewed with the
 * session's lease, so the slot of a worker that died comes back when it lapses; a session denied
 * capacity is a waiter at its place (priority, then first come) and is woken by the release that
 * makes room for it.
 */
export class FleetLimits {
  readonly rules: readonly LimitRule[];
  readonly #redis: Redis;
  readonly #tag: string;

  constructor(redis: Redis, prefix: string, rules: readonly LimitRule[]) {
    this.#redis = redis;
    this.rules = rules;
    this.#tag = `{${prefix}:limits}`;
  }

  get pausedKey(): string {
    return `${this.#tag}:paused`;
  }

  keysFor(values: MatchValues): LimitKey[] {
    return limitKeysFor(this.rules, values);
  }

  #keysOf(key: string): string[] {
    const k = `${this.#tag}:${key}`;
    return [`${k}:held`, `${k}:wait`, `${k}:starts`, `${k}:cool`, `${k}:wexp`, `${k}:tokens`];
  }

  /** Takes a hold on every key (and the fleet's pause check), or says what the session waits for. */
  async acquire(
    sessionId: string,
    keys: readonly LimitKey[],
    how: { priority: number; holdTtlMs: number; pollMs: number },
  ): Promise<Admission> {
    const all = [FLEET, ...keys];
    const redisKeys = [
      `${this.#tag}:paused`,
      `${this.#tag}:seq`,
      `${this.#tag}:keys`,
      ...all.flatMap((k) => this.#keysOf(k.key)),
    ];
    const id = randomUUID();
    const args = [
      Date.now(),
      id,
      sessionId,
      how.holdTtlMs,
      how.priority,
      Math.max(how.holdTtlMs, how.pollMs) * 2,
      how.pollMs,
      all.length,
      ...all.flatMap((k) => [k.key, k.name, k.maxConcurrent, k.maxStartsPerMinute, k.maxTokensPerMinute]),
    ];
    const reply = (await this.#redis.eval(ACQUIRE, redisKeys.length, ...redisKeys, ...args.map(String))) as [
      number,
      string?,
      string?,
      string?,
    ];
    if (reply[0] === 1) return { ok: true, hold: { id, keys: [...keys] } };
    return {
      ok: false,
      waitingFor: {
        limit: String(reply[1]),
        reason: String(reply[2]) as WaitingFor['reason'],
        until: Number(reply[3]),
      },
    };
  }

  /**
   * Gives a hold back (a cooldown until `cooldownUntil` when its attempt was rate limited with a
   * Retry-After; the tokens its attempt reported count against `maxTokensPerMinute`); → sessions to wake.
   */
  async release(hold: Hold, cooldownUntil = 0, tokens = 0): Promise<string[]> {
    if (hold.keys.length === 0) return [];
    const redisKeys = [`${this.#tag}:keys`, ...hold.keys.flatMap((k) => this.#keysOf(k.key))];
    const args = [
      Date.now(),
      hold.id,
      Math.round(cooldownUntil),
      hold.keys.length,
      ...hold.keys.flatMap((k) => [k.key, k.maxConcurrent, k.maxTokensPerMinute]),
      Math.max(0, Math.round(tokens)),
    ];
    return (await this.#redis.eval(RELEASE, redisKeys.length, ...redisKeys, ...args.map(String))) as string[];
  }

  async renew(hold: Hold, ttlMs: number): Promise<void> {
    if (hold.keys.length === 0) return;
    const held = hold.keys.map((k) => this.#keysOf(k.key)[0] as string);
    await this.#redis.eval(RENEW, held.length, ...held, String(Date.now() + ttlMs), hold.id);
  }

  /** The session no longer waits (it started, ended or was cancelled): out of every wait set it may be in. */
  async forget(sessionId: string, keys: readonly LimitKey[]): Promise<void> {
    const redisKeys = [FLEET, ...keys].flatMap((k) => {
      const [, wait, , , wexp] = this.#keysOf(k.key);
      return [wait as string, wexp as string];
    });
    await this.#redis.eval(FORGET, redisKeys.length, ...redisKeys, sessionId);
  }

  /** Lapsed holds dropped everywhere; → the waiters there is room for now (to be woken). */
  async wakeable(): Promise<string[]> {
    const known = await this.#redis.hgetall(`${this.#tag}:keys`);
    const entries = Object.entries(known).slice(0, 1000);
    if (!entries.some(([key]) => key === '*')) entries.unshift(['*', '*']);
    const now = String(Date.now());
    const pipeline = this.#redis.pipeline();
    for (const [key, name] of entries) {
      const [held, wait, , cool] = this.#keysOf(key);
      const rule = this.rules.find((r) => r.name === name);
      pipeline.eval(
        WAKE,
        4,
        held as string,
        wait as string,
        cool as string,
        this.pausedKey,
        now,
        name,
        String(rule?.maxConcurrent ?? 0),
        key === '*' ? '1' : '0',
      );
    }
    const replies = (await pipeline.exec()) ?? [];
    return [
      ...new Set(
        replies.flatMap(([error, value]) => (error === null && Array.isArray(value) ? (value as string[]) : [])),
      ),
    ];
  }

  /** Pauses starts fleet-wide (no name) or of one limit; running attempts go on. */
  async pause(limit?: string): Promise<void> {
    await this.#redis.sadd(this.pausedKey, limit ?? '*');
  }

  async resume(limit?: string): Promise<void> {
    await this.#redis.srem(this.pausedKey, limit ?? '*');
  }

  async paused(): Promise<string[]> {
    return this.#redis.smembers(this.pausedKey);
  }

  /** Every limit key in use: holds in force, waiters, cooldown, paused. */
  async status(): Promise<LimitStatus[]> {
    const [known, paused] = await Promise.all([this.#redis.hgetall(`${this.#tag}:keys`), this.paused()]);
    const entries = Object.entries(known).slice(0, 10_000);
    const now = Date.now();
    const pipeline = this.#redis.pipeline();
    for (const [key] of entries) {
      const [held, wait, , cool] = this.#keysOf(key);
      pipeline.zcount(held as string, `(${now}`, '+inf');
      pipeline.zcard(wait as string);
      pipeline.hget(cool as string, 'until');
    }
    const replies = (await pipeline.exec()) ?? [];
    const at = (i: number): unknown => replies[i]?.[1];
    return entries.map(([key, name], i) => {
      const until = Number(at(i * 3 + 2) ?? 0);
      return {
        name,
        key,
        inUse: Number(at(i * 3) ?? 0),
        waiting: Number(at(i * 3 + 1) ?? 0),
        cooldownUntil: until > now ? until : null,
        paused: paused.includes('*') || paused.includes(name),
      };
    });
  }
}
