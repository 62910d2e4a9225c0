import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import type { StoredMessage } from '../src/runtime/store/session-store.ts';
import { startRedis } from '../test/support/redis.ts';
import { CancelClient, cancelRun, runSessions, type Ctx, type Throughput } from './queue.ts';
import { BenchFailure } from './support/benchmark.ts';
import * as fakeAgent from './support/fake-agent.ts';
import { FAKE_DELTAS, writeFakeAgents, type FakeAgents } from './support/fake-agents.ts';
import { Fleet, PROMPT, sessionIds } from './support/fleet.ts';
import {
  bounded,
  orNull,
  percentile,
  pool,
  processesMentioning,
  procCpuMs,
  procRssBytes,
  sleep,
  tempDir,
  withTimeout,
  type Cleanup,
  type Deadline,
} from './support/harness.ts';
import { median, round } from './support/timing.ts';
import { WorkerProcess } from './support/worker-process.ts';
import { runHandwritten, type HandwrittenResult } from './peers/handwritten.ts';
import { compareLogs, type Entry } from './peers/log-checks.ts';
import {
  dirBytes,
  freePort,
  RestateClient,
  RestateService,
  restateServerBinary,
  restateVersion,
  startRestateServer,
  type AgentProfile,
  type PeerMessage,
  type RestateServer,
} from './peers/restate/harness.ts';

/**
 * sessiond against what a user would build on instead: the same durable sessions on Restate
 * (bench/peers/restate/service.mjs: a virtual object per session, every agent message a journaled
 * `ctx.run`, handler-owned retries, cancellation through Restate's invocation cancellation), side by
 * side in one run on the same machine with the same fake agents, the two sides alternating.
 *
 * Durability as configured here: sessiond on one redis-server with AOF on, `appendfsync everysec`
 * (a crash of the machine may lose the last second); Restate 1.7 with its defaults (a single node:
 * its log (bifrost, local loglet) and partition store in RocksDB, WAL on, fsync on), only its
 * addresses (127.0.0.1), data dir (a temp dir) and telemetry (off) changed.
 *
 * 1. Sessions/s, one prompt each, at most CONCURRENCY turns running at once on each side
 *    (sessiond: a worker of concurrency CONCURRENCY; Restate: CONCURRENCY request-response calls in
 *    flight, since Restate has no per-service concurrency limit):
 *    a. the in-process fake agent emitting 20 messages at once (the orchestration's own cost):
 *       sessiond's worker in this process (queue benchmark's runSessions); Restate's service
 *       process with the same fake in it, plus its server;
 *    b. the fake agent process of the e2e benchmark (support/fake-pi.mjs, a Node process printing one
 *       pi turn): a sessiond worker process (`node bin/sessiond.mjs worker`) vs the Restate service
 *       process, both spawning it and mapping its output with sessiond's pi mapper.
 *    Medians of REPETITIONS alternating runs after a warm-up. ratio = sessiond ÷ Restate, (b).
 * 2. Messages made durable per second: LONG_SESSIONS turns of LONG_MESSAGES messages (in-process fake).
 * 3. Cancel → final state, p50/p99, for a fake pi that exits on SIGTERM and one that ignores it (the
 *    SIGKILL stage after a 2 s grace on both sides): sessiond's cancel() from another process → the
 *    session's `cancelled` state seen by a poll (queue benchmark's cancelRun); Restate's
 *    `PATCH /invocations/<id>/cancel` → the invocation's end (attach returns 409 Cancelled, the agent
 *    stopped by the handler's compensation).
 * 4. kill -9 of the worker / service process while KILL_SESSIONS turns run (a fake pi that prints
 *    one line every KILL_EVERY_MS), a replacement started at once: time from the kill until every
 *    session completed, messages durable before the kill missing afterwards (lost), log entries
 *    written twice (duplicated: same attempt and position), the killed process's agents still
 *    alive ORPHAN_CHECK_MS after the kill and once all sessions recovered. Those agents write every
 *    KILL_EVERY_MS and die of EPIPE on their next write once their parent is gone, on both sides; so
 *    4b repeats the kill with SILENT_SESSIONS silent agents (waiting, as pi does while the model
 *    thinks) and counts theirs ORPHAN_CHECK_MS and SILENT_LATER_MS after the kill: the last line's
 *    orphansAfterKill is the latter.
 * 5. Memory, RSS of the orchestrating processes (sessiond: worker + redis-server; Restate: service +
 *    server): per active session (ACTIVE long-running turns of a /bin/sh fake that sleeps, after
 *    MEMORY_WARMUPS cycles of a few started and cancelled) and per idle session (IDLE completed
 *    sessions at rest: sessiond's Redis used_memory; Restate's server RSS and data dir growth).
 * 6. For reference, what a user writes by hand (peers/handwritten.ts): a BullMQ job per prompt
 *    running an XState actor, appending messages to a Redis list, no lease, no fencing; its
 *    sessions/s with the in-process fake, and its double delivery under a stalled (SIGSTOPped)
 *    worker, counted, next to sessiond's under the same stall.
 */
export const name = 'peers';

const CONCURRENCY = 8;
const INPROC_SESSIONS = Number(process.env.BENCH_PEERS_INPROC_SESSIONS ?? 200);
const PROCESS_SESSIONS = Number(process.env.BENCH_PEERS_PROCESS_SESSIONS ?? 60);
const REPETITIONS = 3;
const MESSAGES = 20;
const LONG_SESSIONS = 6;
const LONG_MESSAGES = 1000;
const RESTATE_COOPERATIVE_SAMPLES = 30;
const RESTATE_STUBBORN_SAMPLES = 30;
const COOPERATIVE_BATCH = 6;
const STUBBORN_BATCH = 4;
const STUBBORN_STAGGER_MS = 250;
const KILL_SESSIONS = 6;
const KILL_MESSAGES = 30;
const KILL_EVERY_MS = 200;
const ORPHAN_CHECK_MS = 3000;
const SILENT_SESSIONS = 4;
const SILENT_LATER_MS = 10_000;
const ACTIVE = 100;
/** Before the idle reading of the active-memory run: this many cycles of CONCURRENCY sessions started and cancelled. */
const MEMORY_WARMUPS = 2;
const IDLE = 200;
const POLL_MS = 5;
/** Everything, setup and teardown included, must end within this. */
const TIME_LIMIT_MS = 12 * 60_000;

const AGENT_PROFILES = (fakes: FakeAgents): Record<string, AgentProfile> => ({
  in20: { kind: 'inproc', messages: MESSAGES },
  in1000: { kind: 'inproc', messages: LONG_MESSAGES },
  proc: {
    kind: 'process',
    command: fakes.nodeTurn,
    args: ['--mode', 'json', '--print', '--messages', String(MESSAGES)],
  },
  hang: { kind: 'process', command: fakes.nodeTurn, args: ['--mode', 'json', '--print', '--hang'] },
  stubborn: { kind: 'process', command: fakes.nodeTurn, args: ['--mode', 'json', '--print', '--hang', '--stubborn'] },
  slow: {
    kind: 'process',
    command: fakes.nodeTurn,
    args: ['--mode', 'json', '--print', '--messages', String(KILL_MESSAGES), '--every', String(KILL_EVERY_MS)],
  },
  idle: { kind: 'process', command: fakes.shHang, args: [] },
});

interface Rate {
  perSec: number;
  wallMs: number;
  /** All CPU per session, µs: sessiond's worker + redis-server + agents + producer; Restate's service + server + agents + client (this process). */
  cpuUs: number;
}

interface RestateSide {
  server: RestateServer;
  service: RestateService;
  client: RestateClient;
  port: number;
  profiles: Record<string, AgentProfile>;
}

interface Env {
  ctx: Ctx;
  redis: Redis;
  fakes: FakeAgents;
  restate: RestateSide;
  cleanup: Cleanup;
  deadline: Deadline;
  log: (line: string) => void;
  runId: string;
}

const cpuOf = (pids: readonly number[]): number =>
  pids.reduce((sum, pid) => {
    const c = procCpuMs(pid);
    return sum + c.ownMs + c.childrenMs;
  }, 0);

const selfCpuMs = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

// ---------------------------------------------------------------- Restate runs

/** `ids`, one prompt each with agent `agent`, CONCURRENCY calls in flight; each must complete with `messages` messages. */
async function restateRun(env: Env, ids: readonly string[], agent: string, messages: number): Promise<Rate> {
  const { client, server, service } = env.restate;
  const pids = [server.pid, service.pid];
  const cpu0 = cpuOf(pids) + selfCpuMs();
  const start = performance.now();
  const bad: string[] = [];
  await withTimeout(
    pool(ids, CONCURRENCY, async (id) => {
      const r = await client.prompt(id, agent, PROMPT);
      if (r.state !== 'completed' || r.seq !== messages || r.attempts !== 1) bad.push(`${id}: ${JSON.stringify(r)}`);
    }),
    env.deadline.cap(Math.max(60_000, ids.length * messages * 5)),
    `${ids.length} Restate sessions (${agent})`,
  );
  const wallMs = performance.now() - start;
  const cpuMs = cpuOf(pids) + selfCpuMs() - cpu0;
  if (bad.length > 0)
    throw new BenchFailure(`Restate: ${bad.length} sessions did not complete as expected, e.g. ${bad[0]}`);
  for (const id of [ids[0], ids[ids.length - 1]]) {
    if (id === undefined) continue;
    const log = await client.messages(id, 1, messages + 10);
    const wrong = log.findIndex((m, i) => m.seq !== i + 1 || m.attempt !== 1 || m.turn !== 1);
    if (
      log.length !== messages ||
      wrong >= 0 ||
      log[0]?.type !== 'session.started' ||
      log.at(-1)?.type !== 'terminal.completed'
    ) {
      throw new BenchFailure(
        `Restate session ${id}: log read back does not match (${log.length} messages, first bad index ${wrong})`,
      );
    }
  }
  return { perSec: ids.length / (wallMs / 1000), wallMs, cpuUs: (cpuMs * 1000) / ids.length };
}

async function untilMessages(
  client: RestateClient,
  id: string,
  atLeast: number,
  timeoutMs: number,
): Promise<PeerMessage[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const log = await client.messages(id, 1, 10_000);
    if (log.length >= atLeast) return log;
    if (Date.now() > deadline)
      throw new BenchFailure(
        `Restate session ${id}: ${log.length} messages after ${timeoutMs} ms, waited for ${atLeast}`,
      );
    await sleep(POLL_MS * 4);
  }
}

/** Restate's cancel → final state: PATCH …/cancel called → the invocation ended (attach answered 409). */
async function restateCancelRun(env: Env, mode: 'cooperative' | 'stubborn'): Promise<number[]> {
  const { client } = env.restate;
  const agent = mode === 'cooperative' ? 'hang' : 'stubborn';
  const total = mode === 'cooperative' ? RESTATE_COOPERATIVE_SAMPLES : RESTATE_STUBBORN_SAMPLES;
  const batch = mode === 'cooperative' ? COOPERATIVE_BATCH : STUBBORN_BATCH;
  const samples: number[] = [];
  const measure = async (id: string, invocation: string): Promise<number> => {
    const calledAt = performance.now();
    await client.cancel(invocation);
    const end = await withTimeout(
      client.attach(invocation),
      env.deadline.cap(20_000),
      `Restate ${id}: the cancelled invocation to end`,
    );
    const ms = performance.now() - calledAt;
    if (end.status !== 409)
      throw new BenchFailure(
        `Restate ${id}: cancelled invocation ended with ${end.status} ${end.body.slice(0, 200)}, expected 409`,
      );
    const view = await client.view(id);
    if (view.state !== 'cancelled') throw new BenchFailure(`Restate ${id}: state ${view.state} after cancel`);
    const kept = await client.messages(id);
    if (!kept.some((m) => m.type === 'session.started') || !kept.some((m) => m.type === 'assistant'))
      throw new BenchFailure(`Restate ${id}: the partial output did not stay`);
    return Math.round(ms);
  };
  // One untimed sample first.
  const warm = `${mode}-warm-${env.runId}`;
  const warmInv = await client.send(warm, agent, PROMPT);
  await untilMessages(client, warm, 2, env.deadline.cap(30_000));
  await measure(warm, warmInv);
  for (let b = 0; samples.length < total; b += 1) {
    const ids = Array.from(
      { length: Math.min(batch, total - samples.length) },
      (_, i) => `${mode}-b${b}-${i}-${env.runId}`,
    );
    const invocations = await Promise.all(ids.map((id) => client.send(id, agent, PROMPT)));
    for (const id of ids) await untilMessages(client, id, 2, env.deadline.cap(30_000));
    await sleep(100);
    if (mode === 'cooperative') {
      for (const [i, id] of ids.entries()) samples.push(await measure(id, invocations[i] ?? ''));
    } else {
      samples.push(
        ...(await Promise.all(
          ids.map(async (id, i) => {
            await sleep(i * STUBBORN_STAGGER_MS);
            return measure(id, invocations[i] ?? '');
          }),
        )),
      );
    }
  }
  const survivors = processesMentioning(env.fakes.nodeTurn);
  if (survivors.length > 0)
    throw new BenchFailure(
      `Restate ${mode}: ${survivors.length} fake agent processes alive after their turns were cancelled`,
    );
  return samples;
}

// ---------------------------------------------------------------- kill -9

interface KillResult {
  recoveryMs: number;
  /** From the kill until every session's log held a message of its next attempt (the takeover, before the re-run). */
  resumedMs: number;
  lost: number;
  duplicated: number;
  /** Messages in the logs beyond one clean turn each: the interrupted attempts' partial output and their failure records, kept. */
  extra: number;
  attempts: number[];
  orphansAtCheck: number;
  orphansAtEnd: number;
  killedAgents: number;
}

const alive = (pids: readonly number[]): number =>
  pids.filter((pid) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  }).length;

/** The processes whose parent is `pid` (Linux /proc): the agents a worker or service process started. */
function childrenOf(pid: number): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) found.push(Number(entry));
    } catch {
      // gone
    }
  }
  return found;
}

async function sessiondKill(env: Env): Promise<KillResult> {
  const prefix = `bench-${env.runId}-kill`;
  const workerOptions = {
    url: env.ctx.url,
    prefix,
    concurrency: CONCURRENCY,
    piCommand: env.fakes.nodeTurn,
    piArgs: ['--messages', String(KILL_MESSAGES), '--every', String(KILL_EVERY_MS)],
    stateDir: env.fakes.stateDir,
    agentDir: env.fakes.agentDir,
  };
  const fleet = await Fleet.start({ workers: 1, ...workerOptions }, 0, env.cleanup, env.deadline);
  const ids = sessionIds(KILL_SESSIONS, 'kill');
  for (const sessionId of ids) await fleet.runtime.enqueue({ sessionId, prompt: PROMPT });
  const before = new Map<string, Entry[]>();
  for (const id of ids) {
    for (;;) {
      const view = await fleet.runtime.getSession(id);
      if (view !== null && view.lastSeq >= 4) break;
      await sleep(20);
    }
  }
  for (const id of ids) before.set(id, (await fleet.runtime.readMessages(id, 1, 1000)).map(entry));
  const worker = fleet.workers[0];
  if (worker === undefined) throw new BenchFailure('no worker');
  const killed = childrenOf(worker.pid);
  const killedAt = performance.now();
  process.kill(worker.pid, 'SIGKILL');
  const resumed = untilResumed(ids, killedAt, env.deadline.cap(120_000), async (id) =>
    (await fleet.runtime.readMessages(id, 1, 1000)).some((m) => m.attempt > 1),
  );
  await WorkerProcess.start({ ...workerOptions, startTimeoutMs: env.deadline.cap(60_000) }, env.cleanup);
  await sleep(ORPHAN_CHECK_MS - (performance.now() - killedAt));
  const orphansAtCheck = alive(killed);
  await withTimeout(
    (async () => {
      for (;;) {
        const states = await fleet.runtime.sessionStates(ids);
        if (ids.every((id) => states[id] === 'completed')) return;
        if (ids.some((id) => states[id] === 'failed'))
          throw new BenchFailure(`sessiond: a session failed after the kill: ${JSON.stringify(states)}`);
        await sleep(POLL_MS * 10);
      }
    })(),
    env.deadline.cap(120_000),
    'sessiond sessions to recover after kill -9',
  );
  const recoveryMs = performance.now() - killedAt;
  const orphansAtEnd = alive(killed);
  const resumedMs = await resumed;
  const after = new Map<string, Entry[]>();
  for (const id of ids) after.set(id, (await fleet.runtime.readMessages(id, 1, 1000)).map(entry));
  await fleet.close();
  return {
    recoveryMs,
    resumedMs,
    ...compareLogs(before, after, KILL_MESSAGES, FAKE_DELTAS),
    orphansAtCheck,
    orphansAtEnd,
    killedAgents: killed.length,
  };
}

function entry(m: StoredMessage | PeerMessage): Entry {
  return { seq: m.seq, attempt: m.attempt, type: m.type, content: m.content };
}

async function restateKill(env: Env): Promise<KillResult> {
  const { client } = env.restate;
  const ids = Array.from({ length: KILL_SESSIONS }, (_, i) => `kill-${i}-${env.runId}`);
  const invocations = await Promise.all(ids.map((id) => client.send(id, 'slow', PROMPT)));
  const before = new Map<string, Entry[]>();
  for (const id of ids) await untilMessages(client, id, 4, env.deadline.cap(30_000));
  for (const id of ids) before.set(id, (await client.messages(id)).map(entry));
  const killed = childrenOf(env.restate.service.pid);
  const killedAt = performance.now();
  await env.restate.service.kill9();
  const resumed = untilResumed(ids, killedAt, env.deadline.cap(120_000), async (id) =>
    (await client.messages(id)).some((m) => m.attempt > 1),
  );
  env.restate.service = await RestateService.start(env.restate.port, env.restate.profiles, env.cleanup);
  await sleep(ORPHAN_CHECK_MS - (performance.now() - killedAt));
  const orphansAtCheck = alive(killed);
  const ends = await withTimeout(
    Promise.all(invocations.map((inv) => client.attach(inv))),
    env.deadline.cap(120_000),
    'Restate sessions to recover after kill -9',
  );
  const recoveryMs = performance.now() - killedAt;
  const orphansAtEnd = alive(killed);
  const resumedMs = await resumed;
  const failed = ends.filter((e) => e.status !== 200 || !e.body.includes('"completed"'));
  if (failed.length > 0)
    throw new BenchFailure(
      `Restate: ${failed.length} sessions did not complete after the kill, e.g. ${failed[0]?.status} ${failed[0]?.body.slice(0, 200)}`,
    );
  const after = new Map<string, Entry[]>();
  for (const id of ids) after.set(id, (await client.messages(id)).map(entry));
  return {
    recoveryMs,
    resumedMs,
    ...compareLogs(before, after, KILL_MESSAGES, FAKE_DELTAS),
    orphansAtCheck,
    orphansAtEnd,
    killedAgents: killed.length,
  };
}

/** How often untilResumed looks at each session's log. */
const RESUME_POLL_MS = 50;

/**
 * Looks at each session's log every RESUME_POLL_MS from the kill until `resumed` says it holds a
 * message of a later attempt; → ms from `killedAt` until the last session did (the re-run's own
 * length, the same on both sides, is the rest of the recovery).
 */
async function untilResumed(
  ids: readonly string[],
  killedAt: number,
  timeoutMs: number,
  resumed: (id: string) => Promise<boolean>,
): Promise<number> {
  const waiting = new Set(ids);
  for (const deadline = performance.now() + timeoutMs; waiting.size > 0; await sleep(RESUME_POLL_MS)) {
    if (performance.now() > deadline) throw new BenchFailure(`${waiting.size} sessions never resumed after the kill`);
    for (const id of [...waiting]) if (await resumed(id)) waiting.delete(id);
  }
  return performance.now() - killedAt;
}

interface SilentKill {
  killedAgents: number;
  aliveAtCheck: number;
  aliveLater: number;
}

/**
 * kill -9 while SILENT_SESSIONS agents are silent (a /bin/sh fake that prints the start of a turn,
 * then sleeps, as pi does while the model thinks): such an agent does not notice its parent is gone
 * (no write to fail). Its processes are counted ORPHAN_CHECK_MS and SILENT_LATER_MS after the kill,
 * with a replacement worker / service started at once; what is left then is killed here.
 */
async function silentKill(
  env: Env,
  start: (ids: readonly string[]) => Promise<{ parent: number; kill: () => Promise<void>; end: () => Promise<void> }>,
): Promise<SilentKill> {
  const ids = Array.from({ length: SILENT_SESSIONS }, (_, i) => `silent-${i}-${env.runId}`);
  const side = await start(ids);
  const killed = childrenOf(side.parent);
  const killedAt = performance.now();
  await side.kill();
  await sleep(ORPHAN_CHECK_MS - (performance.now() - killedAt));
  const aliveAtCheck = alive(killed);
  await sleep(SILENT_LATER_MS - (performance.now() - killedAt));
  const aliveLater = alive(killed);
  for (const pid of killed) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  await side.end();
  return { killedAgents: killed.length, aliveAtCheck, aliveLater };
}

async function sessiondSilentKill(env: Env): Promise<SilentKill> {
  const options = {
    url: env.ctx.url,
    prefix: `bench-${env.runId}-silent`,
    concurrency: CONCURRENCY,
    piCommand: env.fakes.shHang,
    stateDir: env.fakes.stateDir,
    agentDir: env.fakes.agentDir,
  };
  const fleet = await Fleet.start({ workers: 1, ...options }, 0, env.cleanup, env.deadline);
  return silentKill(env, async (ids) => {
    for (const sessionId of ids) await fleet.runtime.enqueue({ sessionId, prompt: PROMPT });
    await untilRunning(fleet, ids, env.deadline);
    const worker = fleet.workers[0];
    if (worker === undefined) throw new BenchFailure('no worker');
    let replacement: WorkerProcess | null = null;
    return {
      parent: worker.pid,
      kill: async () => {
        process.kill(worker.pid, 'SIGKILL');
        replacement = await WorkerProcess.start({ ...options, startTimeoutMs: env.deadline.cap(60_000) }, env.cleanup);
      },
      end: async () => {
        for (const id of ids) await fleet.runtime.cancel(id);
        await (replacement as WorkerProcess | null)?.stop();
        await fleet.close();
      },
    };
  });
}

async function restateSilentKill(env: Env): Promise<SilentKill> {
  const { client } = env.restate;
  return silentKill(env, async (ids) => {
    const invocations = await Promise.all(ids.map((id) => client.send(id, 'idle', PROMPT)));
    for (const id of ids) await untilMessages(client, id, 2, env.deadline.cap(30_000));
    return {
      parent: env.restate.service.pid,
      kill: async () => {
        await env.restate.service.kill9();
        env.restate.service = await RestateService.start(env.restate.port, env.restate.profiles, env.cleanup);
      },
      end: async () => {
        await Promise.all(invocations.map((inv) => client.cancel(inv)));
        await withTimeout(
          Promise.all(invocations.map((inv) => client.attach(inv))),
          env.deadline.cap(60_000),
          'Restate silent sessions cancelled',
        );
      },
    };
  });
}

// ---------------------------------------------------------------- memory

interface Memory {
  /** Per active session, bytes: RSS growth of the orchestrating processes (sessiond: worker + redis-server; Restate: service + server). */
  activeRssBytes: number;
  /** Per idle session, bytes held in memory (sessiond: redis used_memory; Restate: server RSS growth). */
  idleMemoryBytes: number;
  /** Restate only: data dir growth per idle session (RocksDB on disk, journal retained 1 day by default). */
  idleDiskBytes: number | null;
}

async function redisUsedMemory(redis: Redis): Promise<number> {
  const info = await redis.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)?.[1] ?? Number.NaN);
}

async function sessiondMemory(env: Env): Promise<Memory> {
  const fleet = await Fleet.start(
    {
      workers: 1,
      url: env.ctx.url,
      prefix: `bench-${env.runId}-mem`,
      concurrency: ACTIVE + CONCURRENCY,
      // 100 attempts started at once stall this worker's event loop past the default 2 s lease on a
      // loaded host (each holder then fences itself): a worker this wide needs a longer one (docs/operations/deployment.md).
      env: { SESSIOND_LEASE_TTL: '30s' },
      piCommand: env.fakes.shHang,
      stateDir: env.fakes.stateDir,
      agentDir: env.fakes.agentDir,
    },
    0,
    env.cleanup,
    env.deadline,
  );
  const worker = fleet.workers[0];
  if (worker === undefined) throw new BenchFailure('no worker');
  const startAndCancel = async (ids: readonly string[]): Promise<void> => {
    for (const sessionId of ids) await fleet.runtime.enqueue({ sessionId, prompt: PROMPT });
    await untilRunning(fleet, ids, env.deadline);
  };
  const cancelAll = async (ids: readonly string[]): Promise<void> => {
    for (const id of ids) await fleet.runtime.cancel(id);
    await withTimeout(
      (async () => {
        for (;;) {
          const states = await fleet.runtime.sessionStates(ids);
          if (ids.every((id) => states[id] === 'cancelled')) return;
          await sleep(20);
        }
      })(),
      env.deadline.cap(60_000),
      'sessiond memory sessions cancelled',
    );
  };
  for (let w = 0; w < MEMORY_WARMUPS; w += 1) {
    const warm = sessionIds(CONCURRENCY, `mem-warm${w}`);
    await startAndCancel(warm);
    await cancelAll(warm);
  }
  await sleep(1000);
  const rss0 = procRssBytes(worker.pid) + procRssBytes(env.ctx.redisPid);
  const ids = sessionIds(ACTIVE, 'mem');
  await startAndCancel(ids);
  await sleep(500);
  const rss1 = procRssBytes(worker.pid) + procRssBytes(env.ctx.redisPid);
  await cancelAll(ids);
  await fleet.close();
  // Idle: IDLE completed sessions at rest, all in Redis.
  const used0 = await redisUsedMemory(env.redis);
  await runSessions(env.ctx, IDLE, MESSAGES);
  const used1 = await redisUsedMemory(env.redis);
  return {
    activeRssBytes: (rss1 - rss0) / ACTIVE,
    idleMemoryBytes: (used1 - used0) / IDLE,
    idleDiskBytes: null,
  };
}

async function untilRunning(fleet: Fleet, ids: readonly string[], deadline: Deadline): Promise<void> {
  await withTimeout(
    (async () => {
      for (const id of ids) {
        for (;;) {
          const view = await fleet.runtime.getSession(id);
          if (view !== null && view.state === 'running' && view.lastSeq >= 2) break;
          await sleep(20);
        }
      }
    })(),
    deadline.cap(60_000),
    `${ids.length} sessiond sessions running`,
  );
}

async function restateMemory(env: Env): Promise<Memory> {
  const { client } = env.restate;
  const rss = (): number => procRssBytes(env.restate.service.pid) + procRssBytes(env.restate.server.pid);
  const startAll = async (ids: readonly string[]): Promise<string[]> => {
    const invocations = await Promise.all(ids.map((id) => client.send(id, 'idle', PROMPT)));
    for (const id of ids) await untilMessages(client, id, 2, env.deadline.cap(60_000));
    return invocations;
  };
  const cancelAll = async (invocations: readonly string[]): Promise<void> => {
    await Promise.all(invocations.map((inv) => client.cancel(inv)));
    await withTimeout(
      Promise.all(invocations.map((inv) => client.attach(inv))),
      env.deadline.cap(60_000),
      'Restate memory sessions cancelled',
    );
  };
  for (let w = 0; w < MEMORY_WARMUPS; w += 1)
    await cancelAll(await startAll(Array.from({ length: CONCURRENCY }, (_, i) => `mem-warm${w}-${i}-${env.runId}`)));
  await sleep(1000);
  const rss0 = rss();
  const active = await startAll(Array.from({ length: ACTIVE }, (_, i) => `mem-${i}-${env.runId}`));
  await sleep(500);
  const rss1 = rss();
  await cancelAll(active);
  await sleep(500);
  const idle0 = procRssBytes(env.restate.server.pid);
  const disk0 = dirBytes(env.restate.server.dataDir);
  await restateRun(
    env,
    Array.from({ length: IDLE }, (_, i) => `idle-${i}-${env.runId}`),
    'in20',
    MESSAGES,
  );
  await sleep(1000);
  const idle1 = procRssBytes(env.restate.server.pid);
  const disk1 = dirBytes(env.restate.server.dataDir);
  return {
    activeRssBytes: (rss1 - rss0) / ACTIVE,
    idleMemoryBytes: (idle1 - idle0) / IDLE,
    idleDiskBytes: (disk1 - disk0) / IDLE,
  };
}

// ---------------------------------------------------------------- the run

async function startRestate(
  dir: string,
  fakes: FakeAgents,
  cleanup: Cleanup,
  log: (line: string) => void,
): Promise<RestateSide> {
  const bin = restateServerBinary(log);
  const server = await startRestateServer(bin, dir, cleanup);
  const client = new RestateClient(server.ingress, server.admin);
  const port = await freePort();
  const profiles = AGENT_PROFILES(fakes);
  const service = await RestateService.start(port, profiles, cleanup);
  await client.register(`http://127.0.0.1:${port}`);
  log(
    `Restate: ${restateVersion(bin)}, SDK @restatedev/restate-sdk 1.17.2; server listening on ${server.listening.join(', ')} (checked with ss: 127.0.0.1 only), data in a temp dir`,
  );
  return { server, service, client, port, profiles };
}

const perSecs = (runs: readonly Rate[]): string => runs.map((r) => `${r.perSec.toFixed(1)}/s`).join(', ');
const fromThroughput = (t: Throughput): Rate => ({
  perSec: t.perSec,
  wallMs: t.wallMs,
  cpuUs: t.nodeCpuUs + t.redisCpuUs,
});

export async function run(log: (line: string) => void = console.log): Promise<Record<string, unknown>> {
  return bounded(name, TIME_LIMIT_MS, log, async (cleanup, deadline) => {
    const runId = randomBytes(3).toString('hex');
    const redisServer = await startRedis();
    cleanup.add('redis-server', () => redisServer.stop());
    const redis = new Redis(redisServer.url, { maxRetriesPerRequest: null });
    cleanup.add('redis connection', () => void redis.disconnect());
    // sessiond's durability in this benchmark: AOF, fsync every second.
    await redis.config('SET', 'appendonly', 'yes');
    await redis.config('SET', 'appendfsync', 'everysec');
    const tmp = tempDir('sessiond-bench-peers-', cleanup);
    const fakes = writeFakeAgents(`${tmp}/agents`, MESSAGES);
    fakeAgent.install();
    const ctx: Ctx = { url: redisServer.url, redisPid: redisServer.pid, runId, deadline, cleanup, log };
    const restate = await startRestate(`${tmp}/restate`, fakes, cleanup, log);
    const env: Env = { ctx, redis, fakes, restate, cleanup, deadline, log, runId };
    log(
      `sessiond: one redis-server (AOF on, appendfsync everysec); at most ${CONCURRENCY} turns running at once on each side`,
    );

    // ---- 1. sessions/s
    let counter = 0;
    const rIds = (n: number, tag: string): string[] => {
      counter += 1;
      return Array.from({ length: n }, (_, i) => `${tag}${counter}-${i}-${runId}`);
    };
    log(`1a. in-process fake agent, ${MESSAGES} messages per turn, ${INPROC_SESSIONS} sessions per run`);
    await runSessions(ctx, 2000, MESSAGES);
    await restateRun(env, rIds(INPROC_SESSIONS, 'w'), 'in20', MESSAGES);
    const inproc = { sessiond: [] as Rate[], restate: [] as Rate[] };
    for (let rep = 0; rep < REPETITIONS; rep += 1) {
      const s = async () => inproc.sessiond.push(fromThroughput(await runSessions(ctx, INPROC_SESSIONS, MESSAGES)));
      const r = async () => inproc.restate.push(await restateRun(env, rIds(INPROC_SESSIONS, 'i'), 'in20', MESSAGES));
      if (rep % 2 === 0) await s().then(r);
      else await r().then(s);
    }
    log(`  sessiond ${perSecs(inproc.sessiond)}; Restate ${perSecs(inproc.restate)}`);

    log(
      `1b. fake agent process (support/fake-pi.mjs), ${MESSAGES} messages per turn, ${PROCESS_SESSIONS} sessions per run`,
    );
    const fleet = await Fleet.start(
      {
        workers: 1,
        url: ctx.url,
        prefix: `bench-${runId}-proc`,
        concurrency: CONCURRENCY,
        piCommand: fakes.nodeTurn,
        piArgs: ['--messages', String(MESSAGES)],
        stateDir: fakes.stateDir,
        agentDir: fakes.agentDir,
      },
      redisServer.pid,
      cleanup,
      deadline,
    );
    const procIds: string[] = [];
    const fleetRun = async (ids: string[]): Promise<Rate> => {
      procIds.push(...ids);
      const r = await fleet.run(ids, deadline.cap(120_000));
      return {
        perSec: r.perSec,
        wallMs: r.wallMs,
        cpuUs: r.cpuUs.workers + r.cpuUs.agents + r.cpuUs.redis + r.cpuUs.producer,
      };
    };
    await fleetRun(sessionIds(20, 'pw'));
    await restateRun(env, rIds(20, 'pw'), 'proc', MESSAGES);
    const proc = { sessiond: [] as Rate[], restate: [] as Rate[] };
    for (let rep = 0; rep < REPETITIONS; rep += 1) {
      const s = async () => proc.sessiond.push(await fleetRun(sessionIds(PROCESS_SESSIONS, `p${rep}`)));
      const r = async () => proc.restate.push(await restateRun(env, rIds(PROCESS_SESSIONS, 'p'), 'proc', MESSAGES));
      if (rep % 2 === 0) await s().then(r);
      else await r().then(s);
    }
    await fleet.verify(procIds, MESSAGES);
    await fleet.close();
    log(`  sessiond ${perSecs(proc.sessiond)}; Restate ${perSecs(proc.restate)}`);

    // ---- 2. messages made durable per second
    log(`2. ${LONG_SESSIONS} turns × ${LONG_MESSAGES} messages (in-process fake)`);
    const long = { sessiond: [] as number[], restate: [] as number[] };
    for (let rep = 0; rep < 2; rep += 1) {
      const s = async () =>
        long.sessiond.push(
          (LONG_SESSIONS * LONG_MESSAGES) / ((await runSessions(ctx, LONG_SESSIONS, LONG_MESSAGES)).wallMs / 1000),
        );
      const r = async () =>
        long.restate.push(
          (LONG_SESSIONS * LONG_MESSAGES) /
            ((await restateRun(env, rIds(LONG_SESSIONS, 'l'), 'in1000', LONG_MESSAGES)).wallMs / 1000),
        );
      if (rep % 2 === 0) await s().then(r);
      else await r().then(s);
    }
    log(
      `  sessiond ${long.sessiond.map((x) => x.toFixed(0)).join(', ')} messages/s; Restate ${long.restate.map((x) => x.toFixed(0)).join(', ')} messages/s`,
    );

    // ---- 3. cancel
    log(
      '3. cancel → final state (sessiond: cancel() in another process → the poll sees "cancelled"; Restate: PATCH /invocations/<id>/cancel → the invocation ended)',
    );
    const client = new CancelClient(ctx.url);
    cleanup.add('cancel client', () => client.stop());
    await withTimeout(client.ready, deadline.cap(60_000), 'the cancel client to start');
    const cancel: Record<string, { sessiond: number[]; restate: number[] }> = {};
    /** sessiond's cancel → the final state's transition as the worker recorded it (no reader's poll in it). */
    const recorded: Record<string, number[]> = {};
    for (const mode of ['cooperative', 'stubborn'] as const) {
      const r = await restateCancelRun(env, mode);
      const samples = await cancelRun(ctx, client, mode, fakes.nodeTurn, {
        agentDir: fakes.agentDir,
        stateDir: fakes.stateDir,
      });
      const s = samples.map((x) => x.observedMs);
      const t = samples.map((x) => x.transitionMs);
      cancel[mode] = { sessiond: s, restate: r };
      recorded[mode] = t;
      log(
        `  ${mode}: sessiond p50 ${percentile(s, 50)} ms, p99 ${percentile(s, 99)} ms (recorded: p50 ${percentile(t, 50)} ms, p99 ${percentile(t, 99)} ms); Restate p50 ${percentile(r, 50)} ms, p99 ${percentile(r, 99)} ms`,
      );
    }
    await client.stop();

    // ---- 4. kill -9
    log(
      `4. kill -9 of the worker / service process with ${KILL_SESSIONS} turns running (fake pi, ${KILL_MESSAGES} messages, one line every ${KILL_EVERY_MS} ms), a replacement started at once`,
    );
    const killR = await restateKill(env);
    const killS = await sessiondKill(env);
    const killLine = (k: KillResult): string =>
      `recovered in ${(k.recoveryMs / 1000).toFixed(1)} s (every session's next attempt writing after ${(k.resumedMs / 1000).toFixed(1)} s); lost ${k.lost}, duplicated ${k.duplicated}, kept from the interrupted attempts ${k.extra}; attempts ${k.attempts.join(',')}; ` +
      `of the ${k.killedAgents} agents of the killed process, ${k.orphansAtCheck} alive ${ORPHAN_CHECK_MS / 1000} s after the kill, ${k.orphansAtEnd} when all had recovered`;
    log(`  sessiond: ${killLine(killS)}`);
    log(`  Restate:  ${killLine(killR)}`);
    log(
      `4b. the same kill -9 with ${SILENT_SESSIONS} silent agents (a /bin/sh fake that sleeps after the start of its turn, as pi while the model thinks)`,
    );
    const silentR = await restateSilentKill(env);
    const silentS = await sessiondSilentKill(env);
    const silentLine = (k: SilentKill): string =>
      `of the ${k.killedAgents} agents of the killed process, ${k.aliveAtCheck} alive ${ORPHAN_CHECK_MS / 1000} s after the kill, ${k.aliveLater} after ${SILENT_LATER_MS / 1000} s`;
    log(`  sessiond: ${silentLine(silentS)}`);
    log(`  Restate:  ${silentLine(silentR)}`);

    // ---- 5. memory
    log(
      `5. memory: ${ACTIVE} active sessions (a /bin/sh fake that sleeps), ${IDLE} idle sessions (one completed turn of ${MESSAGES} messages)`,
    );
    const memS = await sessiondMemory(env);
    const memR = await restateMemory(env);
    const kb = (b: number | null): string => (b === null ? '-' : `${(b / 1024).toFixed(1)} KiB`);
    log(
      `  sessiond: active ${kb(memS.activeRssBytes)} RSS (worker + redis-server); idle ${kb(memS.idleMemoryBytes)} in Redis (used_memory)`,
    );
    log(
      `  Restate:  active ${kb(memR.activeRssBytes)} RSS (service + server); idle ${kb(memR.idleMemoryBytes)} server RSS, ${kb(memR.idleDiskBytes)} on disk`,
    );

    // ---- 6. by hand
    log(
      '6. by hand: a BullMQ job per prompt running an XState actor, messages appended to a Redis list, no lease or fencing',
    );
    const hand: HandwrittenResult = await runHandwritten({
      url: ctx.url,
      redis,
      runId,
      cleanup,
      deadline,
      log,
      sessions: INPROC_SESSIONS,
      messages: MESSAGES,
      concurrency: CONCURRENCY,
      fakes,
    });

    const med = (runs: readonly Rate[]): number => median(runs.map((r) => r.perSec));
    const sessiondProc = med(proc.sessiond);
    const restateProc = med(proc.restate);
    const coop = cancel.cooperative ?? { sessiond: [], restate: [] };
    const stub = cancel.stubborn ?? { sessiond: [], restate: [] };
    const side = (who: 'sessiond' | 'restate', k: KillResult, silent: SilentKill, m: Memory) => ({
      inprocSessionsPerSec: orNull(round(med(inproc[who]), 1)),
      inprocCpuUsPerSession: orNull(round(median(inproc[who].map((r) => r.cpuUs)), 0)),
      processSessionsPerSec: orNull(round(med(proc[who]), 1)),
      processCpuUsPerSession: orNull(round(median(proc[who].map((r) => r.cpuUs)), 0)),
      messagesPerSec: orNull(round(median(long[who]), 0)),
      cancelMs: {
        cooperative: { p50: percentile(coop[who], 50), p99: percentile(coop[who], 99) },
        stubborn: { p50: percentile(stub[who], 50), p99: percentile(stub[who], 99) },
      },
      cancelSamplesMs: { cooperative: coop[who], stubborn: stub[who] },
      kill: {
        recoveryMs: Math.round(k.recoveryMs),
        resumedMs: Math.round(k.resumedMs),
        lost: k.lost,
        duplicated: k.duplicated,
        keptFromInterrupted: k.extra,
        orphansAtCheck: k.orphansAtCheck,
        orphansAtEnd: k.orphansAtEnd,
        killedAgents: k.killedAgents,
        silent,
      },
      memory: {
        activeRssBytes: orNull(Math.round(m.activeRssBytes)),
        idleMemoryBytes: orNull(Math.round(m.idleMemoryBytes)),
        idleDiskBytes: m.idleDiskBytes === null ? null : orNull(Math.round(m.idleDiskBytes)),
      },
    });
    const details = {
      concurrency: CONCURRENCY,
      sessiond: side('sessiond', killS, silentS, memS),
      restate: side('restate', killR, silentR, memR),
      handwritten: hand,
    };
    log(`details ${JSON.stringify(details)}`);
    return {
      bench: name,
      sessiondSessionsPerSec: orNull(round(sessiondProc, 1)),
      restateSessionsPerSec: orNull(round(restateProc, 1)),
      ratio: orNull(round(sessiondProc / restateProc, 3)),
      sessiondMessagesPerSec: orNull(round(median(long.sessiond), 0)),
      restateMessagesPerSec: orNull(round(median(long.restate), 0)),
      cancelP99Ms: { sessiond: percentile(coop.sessiond, 99), restate: percentile(coop.restate, 99) },
      // The same cancels, to the final state as sessiond's worker recorded it: the issue's own measure (the row above
      // has sessiond's reader polling every 5 ms, while Restate's attach is told the end).
      cancelRecordedMs: {
        p50: percentile(recorded.cooperative ?? [], 50),
        p99: percentile(recorded.cooperative ?? [], 99),
      },
      // kill -9 (part 4): from the kill until every session completed again, a replacement started at once.
      recoveryMs: { sessiond: Math.round(killS.recoveryMs), restate: Math.round(killR.recoveryMs) },
      // The silent agents' processes still alive SILENT_LATER_MS after the kill, a replacement running since
      // (the writing agents of part 4 die on their next write, EPIPE, on both sides).
      orphansAfterKill: { sessiond: silentS.aliveLater, restate: silentR.aliveLater },
    };
  });
}
