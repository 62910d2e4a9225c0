import type { Redis } from 'ioredis';
import type { ApprovalOption } from '../../protocol/index.ts';
import type { Keys } from '../keys.ts';

/**
 * Durable tool approvals in Redis. Each session's requests live in one hash of the session's slot
 * (`{s:<id>}:approvals`): `<requestId>` → the request (JSON, written once), `<requestId>:asked` →
 * the attempts that asked it, `<requestId>:decision` → the decision (JSON, written once: the first
 * decision wins), `<requestId>:delivered` → the attempt that gave it to the agent. A fleet-wide
 * zset (`{<prefix>}:approvals-waiting`, score: the deadline) lists the requests waiting, for the
 * metrics and the dashboard; it is best effort (another slot), kept right by the holders and
 * pruned past the deadlines.
 */

export interface ApprovalRequestRecord {
  requestId: string;
  turn: number;
  toolCallId: string;
  tool: string;
  kind?: string;
  arguments: unknown;
  options: ApprovalOption[];
  requestedAt: number;
  deadlineAt: number;
}

export interface ApprovalDecisionRecord {
  outcome: 'allowed' | 'denied';
  optionId: string | null;
  by: string;
  at: number;
  reason?: string;
}

export interface StoredApproval {
  request: ApprovalRequestRecord;
  asked: number[];
  decision: ApprovalDecisionRecord | null;
  delivered: number | null;
}

/** Requests one session may hold at once (a turn asking more is denied: nothing grows without bound). */
export const MAX_APPROVALS_PER_SESSION = 200;

/** KEYS: lease, approvals. ARGV: token, id, requestJson, attempt, maxFields. → {-1} stale | {-2} full | {existed, request, asked, decision|false, delivered|false}. */
const ASK = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {-1} end
local id = ARGV[2]
local raw = redis.call('HGET', KEYS[2], id)
local existed = 1
if not raw then
  if redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[5]) then return {-2} end
  redis.call('HSET', KEYS[2], id, ARGV[3])
  raw = ARGV[3]
  existed = 0
end
local asked = redis.call('HGET', KEYS[2], id .. ':asked') or ''
if not string.find(',' .. asked .. ',', ',' .. ARGV[4] .. ',', 1, true) then
  if asked == '' then asked = ARGV[4] else asked = asked .. ',' .. ARGV[4] end
  redis.call('HSET', KEYS[2], id .. ':asked', asked)
end
return {existed, raw, asked, redis.call('HGET', KEYS[2], id .. ':decision') or false, redis.call('HGET', KEYS[2], id .. ':delivered') or false}
`;

/** KEYS: approvals. ARGV: id, decisionJson. → {0} no such request | {1, decision} decided now | {2, decision} already decided. */
const DECIDE = `
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return {0} end
local d = redis.call('HGET', KEYS[1], ARGV[1] .. ':decision')
if d then return {2, d} end
redis.call('HSET', KEYS[1], ARGV[1] .. ':decision', ARGV[2])
return {1, ARGV[2]}
`;

/** KEYS: lease, approvals. ARGV: token, id, attempt. → -1 stale | 1 delivered now | 0 delivered before. */
const DELIVER = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
if redis.call('HSETNX', KEYS[2], ARGV[2] .. ':delivered', ARGV[3]) == 1 then return 1 end
return 0
`;

/** KEYS: lease, approvals. ARGV: token. → -1 stale | the fields removed. */
const CLEAR = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
local fields = redis.call('HKEYS', KEYS[2])
redis.call('DEL', KEYS[2])
return fields
`;

export class StaleApprovalError extends Error {
  override readonly name = 'StaleLeaseError';
}

export class ApprovalStore {
  readonly #redis: Redis;
  readonly #keys: Keys;

  constructor(redis: Redis, keys: Keys) {
    this.#redis = redis;
    this.#keys = keys;
  }

  get waitingKey(): string {
    return `{${this.#keys.prefix}}:approvals-waiting`;
  }

  #key(sessionId: string): string {
    return this.#keys.session(sessionId, 'approvals');
  }

  /** The holder registers (or finds again) a request; StaleApprovalError when its lease is gone; null when the session holds too many. */
  async ask(
    sessionId: string,
    token: string,
    request: ApprovalRequestRecord,
    attempt: number,
  ): Promise<(StoredApproval & { existed: boolean }) | null> {
    const r = (await this.#redis.eval(
      ASK,
      2,
      this.#keys.session(sessionId, 'lease'),
      this.#key(sessionId),
      token,
      request.requestId,
      JSON.stringify(request),
      attempt,
      MAX_APPROVALS_PER_SESSION * 4,
    )) as unknown[];
    if (r[0] === -1) throw new StaleApprovalError(`session ${sessionId}: the lease was taken over`);
    if (r[0] === -2) return null;
    return {
      existed: r[0] === 1,
      request: JSON.parse(String(r[1])) as ApprovalRequestRecord,
      asked: String(r[2])
        .split(',')
        .filter((a) => a !== '')
        .map(Number),
      decision: typeof r[3] === 'string' ? (JSON.parse(r[3]) as ApprovalDecisionRecord) : null,
      delivered: typeof r[4] === 'string' ? Number(r[4]) : null,
    };
  }

  /** The first decision wins: `decided` false means another one was there already (returned). */
  async decide(
    sessionId: string,
    requestId: string,
    decision: ApprovalDecisionRecord,
  ): Promise<{ found: false } | { found: true; decided: boolean; decision: ApprovalDecisionRecord }> {
    const r = (await this.#redis.eval(
      DECIDE,
      1,
      this.#key(sessionId),
      requestId,
      JSON.stringify(decision),
    )) as unknown[];
    if (r[0] === 0) return { found: false };
    return { found: true, decided: r[0] === 1, decision: JSON.parse(String(r[1])) as ApprovalDecisionRecord };
  }

  /** Marks the decision given to the agent by `attempt`: false when an earlier delivery was recorded (then it is not given again). */
  async deliver(sessionId: string, token: string, requestId: string, attempt: number): Promise<boolean> {
    const r = await this.#redis.eval(
      DELIVER,
      2,
      this.#keys.session(sessionId, 'lease'),
      this.#key(sessionId),
      token,
      requestId,
      attempt,
    );
    if (r === -1) throw new StaleApprovalError(`session ${sessionId}: the lease was taken over`);
    return r === 1;
  }

  async get(sessionId: string, requestId: string): Promise<StoredApproval | null> {
    const [raw, asked, decision, delivered] = await this.#redis.hmget(
      this.#key(sessionId),
      requestId,
      `${requestId}:asked`,
      `${requestId}:decision`,
      `${requestId}:delivered`,
    );
    if (raw === null || raw === undefined) return null;
    return {
      request: JSON.parse(raw) as ApprovalRequestRecord,
      asked: (asked ?? '')
        .split(',')
        .filter((a) => a !== '')
        .map(Number),
      decision: decision === null || decision === undefined ? null : (JSON.parse(decision) as ApprovalDecisionRecord),
      delivered: delivered === null || delivered === undefined ? null : Number(delivered),
    };
  }

  /** Every request of the session, oldest first. */
  async list(sessionId: string): Promise<StoredApproval[]> {
    const all = await this.#redis.hgetall(this.#key(sessionId));
    const out: StoredApproval[] = [];
    for (const [field, raw] of Object.entries(all)) {
      if (field.includes(':')) continue;
      out.push({
        request: JSON.parse(raw) as ApprovalRequestRecord,
        asked: (all[`${field}:asked`] ?? '')
          .split(',')
          .filter((a) => a !== '')
          .map(Number),
        decision:
          all[`${field}:decision`] === undefined
            ? null
            : (JSON.parse(all[`${field}:decision`] ?? 'null') as ApprovalDecisionRecord),
        delivered: all[`${field}:delivered`] === undefined ? null : Number(all[`${field}:delivered`]),
      });
    }
    return out.sort((a, b) => a.request.requestedAt - b.request.requestedAt);
  }

  /** The turn is over: its requests go (the agent that asked is gone). StaleApprovalError when the lease is gone. */
  async clear(sessionId: string, token: string): Promise<number> {
    const r = (await this.#redis.eval(
      CLEAR,
      2,
      this.#keys.session(sessionId, 'lease'),
      this.#key(sessionId),
      token,
    )) as number | string[];
    if (r === -1 || !Array.isArray(r)) throw new StaleApprovalError(`session ${sessionId}: the lease was taken over`);
    const ids = r.filter((f) => !f.includes(':'));
    if (ids.length > 0)
      // The waiting index is a hint for the deadline sweep, which drops entries it finds answered.
      await this.#redis.zrem(this.waitingKey, ...ids.map((id) => `${sessionId} ${id}`)).catch(() => undefined);
    return ids.length;
  }

  /** Fleet index of waiting requests (best effort). */
  async markWaiting(sessionId: string, requestId: string, deadlineAt: number): Promise<void> {
    // The waiting index is a hint for the deadline sweep; the request itself is stored (fenced) already.
    await this.#redis.zadd(this.waitingKey, deadlineAt, `${sessionId} ${requestId}`).catch(() => undefined);
  }

  async markAnswered(sessionId: string, requestId: string): Promise<void> {
    // The waiting index is a hint for the deadline sweep, which drops entries it finds answered.
    await this.#redis.zrem(this.waitingKey, `${sessionId} ${requestId}`).catch(() => undefined);
  }

  /** Requests waiting fleet-wide (those a minute past their deadline, whose holder died, are dropped first). */
  async waitingCount(now = Date.now()): Promise<number> {
    await this.#redis.zremrangebyscore(this.waitingKey, '-inf', now - 60_000);
    return this.#redis.zcard(this.waitingKey);
  }

  /** The waiting requests fleet-wide: `{sessionId, requestId, deadlineAt}`, soonest deadline first, at most `limit`. */
  async waiting(limit = 1000): Promise<Array<{ sessionId: string; requestId: string; deadlineAt: number }>> {
    const flat = await this.#redis.zrange(this.waitingKey, 0, limit - 1, 'WITHSCORES');
    const out: Array<{ sessionId: string; requestId: string; deadlineAt: number }> = [];
    for (let i = 0; i + 1 < flat.length; i += 2) {
      const [sessionId = '', requestId = ''] = (flat[i] ?? '').split(' ');
      out.push({ sessionId, requestId, deadlineAt: Number(flat[i + 1]) });
    }
    return out;
  }
}
