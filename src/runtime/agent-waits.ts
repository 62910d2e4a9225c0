import type { Redis } from 'ioredis';
import type { Keys } from './keys.ts';
import type { SessionQueue } from './queue.ts';
import type { SessionStore } from './store/session-store.ts';

/**
 * Sessions whose next attempt needs an agent the worker that took them does not offer. Such a worker
 * hands the session back without running anything (admission.ts: the session parks in `waiting`,
 * `waitingFor.reason: "agent"`) and records it here; a worker that offers the agent wakes it (its
 * parked activation promoted) when it starts, at each heartbeat, and when told of a hand-back.
 *
 * Keys, all under the fleet tag `{<prefix>}` (one slot): a set of the agents with waiters, and per
 * agent a zset sessionId → since when it waits (first come first woken). An entry is removed when a
 * worker offering the agent admits the session, or by a wake pass that finds the session no longer
 * activated (cancelled, deleted, done): any worker's pass looks at the oldest entries of every agent.
 */
export interface AgentWaitKeys {
  agents: string;
  agent(name: string): string;
}

export function agentWaitKeys(keys: Keys): AgentWaitKeys {
  return {
    agents: keys.fleetKey(0, 'agent-waits'),
    agent: (name) => keys.fleetKey(0, `agent-wait:${name}`),
  };
}

/** One agent no worker that took its sessions offers: how many sessions wait for it, the first few. */
export interface AgentWait {
  agent: string;
  sessions: number;
  oldest: Array<{ sessionId: string; since: number }>;
}

/** KEYS: the agents set, the agent's zset. ARGV: the agent. Forgets an agent with no waiter left (atomic with a new waiter's ZADD + SADD). */
const FORGET_IDLE_AGENT = `
if redis.call('ZCARD', KEYS[2]) == 0 then redis.call('SREM', KEYS[1], ARGV[1]) end
return 0
`;

/** Records that `sessionId` waits for a worker offering `agent` (its first `since` kept). */
export async function addAgentWait(
  redis: Redis,
  keys: Keys,
  sessionId: string,
  agent: string,
  since: number,
): Promise<void> {
  const k = agentWaitKeys(keys);
  await redis.multi().zadd(k.agent(agent), 'NX', since, sessionId).sadd(k.agents, agent).exec();
}

/** The session no longer waits for `agent`. */
export async function removeAgentWait(redis: Redis, keys: Keys, sessionId: string, agent: string): Promise<void> {
  const k = agentWaitKeys(keys);
  await redis.zrem(k.agent(agent), sessionId);
  await redis.eval(FORGET_IDLE_AGENT, 2, k.agents, k.agent(agent), agent);
}

/** How many of an agent's waiters a reader checks are still waiting (the rest are counted as listed). */
const CHECKED = 1000;

/**
 * Every agent sessions wait for, with how many and the `first` oldest of them (doctor, readers). An
 * entry whose session is no longer in `waiting` (cancelled or deleted since the last wake pass) is not
 * counted among the first CHECKED.
 */
export async function readAgentWaits(redis: Redis, keys: Keys, first = 5): Promise<AgentWait[]> {
  const k = agentWaitKeys(keys);
  const agents = (await redis.smembers(k.agents)).sort();
  const waits: AgentWait[] = [];
  for (const agent of agents) {
    const [count, listed] = await Promise.all([
      redis.zcard(k.agent(agent)),
      redis.zrange(k.agent(agent), 0, CHECKED - 1, 'WITHSCORES'),
    ]);
    const entries: Array<{ sessionId: string; since: number }> = [];
    for (let i = 0; i + 1 < listed.length; i += 2)
      entries.push({ sessionId: listed[i] as string, since: Number(listed[i + 1]) });
    const states = await Promise.all(entries.map((e) => redis.hget(keys.session(e.sessionId, 'meta'), 'state')));
    const waiting = entries.filter((_, i) => states[i] === 'waiting');
    const sessions = waiting.length + Math.max(0, count - entries.length);
    if (sessions === 0) continue;
    waits.push({ agent, sessions, oldest: waiting.slice(0, first) });
  }
  return waits;
}

/**
 * Wakes up to `room` sessions waiting for agents `offers` accepts, oldest first: each parked
 * activation is promoted (its priority kept). A session with no activation left no longer waits and
 * is forgotten; one whose activation is not parked (running, queued) is left alone. → how many were woken.
 */
export async function wakeAgentWaiters(
  store: SessionStore,
  queue: SessionQueue,
  offers: (agent: string) => boolean,
  room: number,
): Promise<number> {
  if (room <= 0) return 0;
  const redis = store.redis;
  const k = agentWaitKeys(store.keys);
  const all = await redis.smembers(k.agents);
  // The other agents' oldest entries of sessions gone meanwhile (cancelled, deleted, done) are forgotten
  // here too: with no worker offering an agent, nothing else would remove them.
  for (const agent of all.filter((a) => !offers(a))) await forgetGone(store, agent, PRUNED);
  const agents = all.filter(offers);
  let woken = 0;
  for (const agent of agents) {
    // A few more than there is room for: some may be running or gone already.
    const ids = await redis.zrange(k.agent(agent), 0, room - woken + 4);
    for (const sessionId of ids) {
      if (woken >= room) return woken;
      const jobId = await store.activeJobId(sessionId);
      if (jobId === null) {
        await removeAgentWait(redis, store.keys, sessionId, agent);
        continue;
      }
      const job = await queue.getJob(jobId);
      if (job === undefined || (await job.getState()) !== 'delayed') continue;
      try {
        await job.promote();
        woken += 1;
      } catch {
        // It moved on meanwhile (taken by a worker, removed): nothing to wake.
      }
    }
    if (ids.length === 0) await redis.eval(FORGET_IDLE_AGENT, 2, k.agents, k.agent(agent), agent);
  }
  return woken;
}

/** Entries of an agent no worker here offers looked at per wake pass (the oldest). */
const PRUNED = 8;

/** Forgets the `count` oldest waiters of `agent` whose session has no activation left. */
async function forgetGone(store: SessionStore, agent: string, count: number): Promise<void> {
  const k = agentWaitKeys(store.keys);
  const ids = await store.redis.zrange(k.agent(agent), 0, count - 1);
  for (const sessionId of ids)
    if ((await store.activeJobId(sessionId)) === null) await removeAgentWait(store.redis, store.keys, sessionId, agent);
  if (ids.length === 0) await store.redis.eval(FORGET_IDLE_AGENT, 2, k.agents, k.agent(agent), agent);
}
