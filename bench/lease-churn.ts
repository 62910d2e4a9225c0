import { randomBytes } from 'node:crypto';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { loadavg } from 'node:os';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import { registerAgent } from '../src/agents/registry.ts';
import { defineAgent } from '../src/index.ts';
import { deploymentPolicy } from '../src/runtime/deployment-policy.ts';
import { internals } from '../src/runtime/internals.ts';
import { createSessionQueue } from '../src/runtime/queue.ts';
import { createRedis } from '../src/runtime/redis/connection.ts';
import { Runtime } from '../src/runtime/runtime.ts';
import { SessionWorker, WORKER_DEFAULTS } from '../src/runtime/worker.ts';
import { startRedis } from '../test/support/redis.ts';
import { sleep } from './support/harness.ts';

/**
 * Does self-fencing churn on a loaded host? SESSIONS sessions held at once by one in-process worker with the
 * default lease (WORKER_DEFAULTS: 2 s, renewed every 500 ms, the holder fences itself 1.8 s after the last
 * renewal it saw land) and stalled check (500 ms; 1 s when the runs in BENCHMARKS.md were made). Each turn's
 * agent (in-process) streams one message every MESSAGE_EVERY_MS for TURN_MS, so the worker also makes the turns'
 * fenced writes meanwhile. Counted: the
 * worker's self-fences, how its activations ended (a lost lease: `stale`), its other warnings, attempts beyond the
 * first, and the event loop's delay (what delays a renewal in this process). Not part of `npm run bench`:
 * `node --import tsx bench/lease-churn.ts` (LEASE_CHURN_SESSIONS, LEASE_CHURN_TURN_MS, LEASE_CHURN_LEASE_MS).
 * Loopback only; ends by itself within TURN_MS + 60 s.
 */
const SESSIONS = Number(process.env.LEASE_CHURN_SESSIONS ?? 100);
const TURN_MS = Number(process.env.LEASE_CHURN_TURN_MS ?? 30_000);
const LEASE_MS = Number(process.env.LEASE_CHURN_LEASE_MS ?? WORKER_DEFAULTS.leaseTtlMs);
const MESSAGE_EVERY_MS = 200;
const AGENT = 'lease-churn';

const streaming = defineAgent({
  name: AGENT,
  options: z.object({}),
  async *run({ signal }) {
    yield { type: 'session.started', content: { sessionId: `churn-${randomBytes(4).toString('hex')}` } };
    const end = Date.now() + TURN_MS;
    for (let i = 0; Date.now() < end; i += 1) {
      await sleep(MESSAGE_EVERY_MS);
      if (signal.aborted) return;
      yield { type: 'assistant', content: { text: `part ${i}. ` } };
    }
    yield { type: 'terminal.completed', content: { stopReason: 'stop' } };
  },
});

async function main(): Promise<void> {
  registerAgent(streaming.name, streaming.definition);
  const redis = await startRedis();
  const made: Redis[] = [];
  const connect = (role: string): Redis => {
    const r = createRedis(redis.url, { role, maxRetriesPerRequest: null, log: () => undefined });
    made.push(r);
    return r;
  };
  const counts = { selfFenced: 0, released: {} as Record<string, number>, warnings: {} as Record<string, number> };
  const prefix = `lc-${randomBytes(3).toString('hex')}`;
  const policy = deploymentPolicy({ workspace: '/tmp' });
  const runtime = new Runtime({ connect, prefix, policy });
  const ended = new Map<string, () => void>();
  const worker = new SessionWorker({
    connect,
    keys: internals(runtime).keys,
    queue: createSessionQueue(connect('churn-worker-queue'), internals(runtime).keys),
    ...WORKER_DEFAULTS,
    leaseTtlMs: LEASE_MS,
    concurrency: SESSIONS,
    agentOptions: {},
    policy,
    events: { turnEnded: (event) => ended.get(event.sessionId)?.() },
    log: (level, message, fields) => {
      if (message.includes('self-fenced')) counts.selfFenced += 1;
      else if (message === 'session released') {
        const outcome = String(fields?.outcome);
        counts.released[outcome] = (counts.released[outcome] ?? 0) + 1;
      } else if (level !== 'info') counts.warnings[message] = (counts.warnings[message] ?? 0) + 1;
    },
  });
  await worker.start();
  const delay = monitorEventLoopDelay({ resolution: 10 });
  const started = Date.now();
  const load = loadavg().map((n) => n.toFixed(2));
  try {
    const ids = Array.from({ length: SESSIONS }, (_, i) => `churn-${i}`);
    const done = ids.map((id) => new Promise<void>((resolve) => ended.set(id, resolve)));
    delay.enable();
    for (const sessionId of ids) await runtime.enqueue({ sessionId, prompt: 'stream', options: { agent: AGENT } });
    const limit = sleep(TURN_MS + 60_000).then(() => 'timeout' as const);
    const outcome = await Promise.race([Promise.all(done).then(() => 'ended' as const), limit]);
    delay.disable();
    const sessions = await Promise.all(ids.map((id) => runtime.getSession(id)));
    const states: Record<string, number> = {};
    for (const s of sessions) states[s?.state ?? 'none'] = (states[s?.state ?? 'none'] ?? 0) + 1;
    const retried = sessions.filter((s) => (s?.context?.attempt ?? 1) > 1).length;
    const interrupted = sessions.filter((s) => s?.history.some((h) => h.to === 'interrupted')).length;
    const ms = (ns: number): number => Math.round(ns / 1e5) / 10;
    console.log(
      JSON.stringify({
        sessions: SESSIONS,
        leaseTtlMs: LEASE_MS,
        turnMs: TURN_MS,
        outcome,
        wallMs: Date.now() - started,
        loadAverageAtStart: load,
        loadAverageAtEnd: loadavg().map((n) => n.toFixed(2)),
        selfFenced: counts.selfFenced,
        warnings: counts.warnings,
        released: counts.released,
        finalStates: states,
        sessionsRetried: retried,
        sessionsInterrupted: interrupted,
        eventLoopDelayMs: { p50: ms(delay.percentile(50)), p99: ms(delay.percentile(99)), max: ms(delay.max) },
      }),
    );
  } finally {
    await worker.close(2000);
    await runtime.close();
    made.forEach((r) => r.disconnect());
    await redis.stop();
  }
}

await main();
process.exit(0);
