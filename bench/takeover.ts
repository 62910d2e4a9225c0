import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadavg } from 'node:os';
import { Redis } from 'ioredis';
import { startRedis } from '../test/support/redis.ts';
import { partitionTag } from '../src/runtime/keys.ts';
import { QUEUE_NAME } from '../src/runtime/queue.ts';
import { BenchFailure } from './support/benchmark.ts';
import { writeFakeAgents } from './support/fake-agents.ts';
import { Fleet, PROMPT, sessionIds } from './support/fleet.ts';
import { Cleanup, Deadline, processesMentioning, sleep, tempDir, withTimeout } from './support/harness.ts';
import { median, round } from './support/timing.ts';
import { WorkerProcess } from './support/worker-process.ts';

/**
 * Where a kill -9's recovery time goes: the peers benchmark's kill run (KILL_SESSIONS turns of a
 * fake pi printing one line every KILL_EVERY_MS on a worker of concurrency 8, the worker
 * `kill -9`ed once every session has 4 messages), timed phase by phase from event timestamps
 * rather than by polling, so that a loaded host shifts the phases but not what they are made of:
 * - `stalled`: BullMQ's `stalled` event of the session's job (its events stream's entry id is Redis's clock);
 * - `active`: the job's next `active` event (taken by a worker; a `delayed` one before means the
 *   lease had not lapsed yet);
 * - `restored`: the interrupted attempt's end as recorded by the new holder (attempt 1's endedAt);
 * - `attempt`: attempt 2's startedAt (after the retry policy's delay);
 * - `spawned`: the agent process's exec (a wrapper around the fake pi writes the time);
 * - `firstOutput`: the first message of attempt 2 in the log (polled every POLL_MS);
 * - `completed`: the turn's endedAt.
 * Each from the kill, per session; the table gives the median and max over the sessions.
 * Two variants in the same run, alternating: `replacement` (a new worker process started at the
 * kill, as the peers benchmark does) and `standby` (a second worker already running).
 */
export const name = 'takeover';

const KILL_SESSIONS = Number(process.env.BENCH_TAKEOVER_SESSIONS ?? 6);
const ROUNDS = Number(process.env.BENCH_TAKEOVER_ROUNDS ?? 2);
const KILL_MESSAGES = 30;
const KILL_EVERY_MS = 200;
const POLL_MS = 10;
const TIME_LIMIT_MS = 8 * 60_000;
const PHASES = ['stalled', 'active', 'restored', 'attempt', 'spawned', 'firstOutput', 'completed'] as const;
type Phase = (typeof PHASES)[number];

interface RoundResult {
  variant: 'replacement' | 'standby';
  /** The replacement worker's start (its "started" line), ms from the kill; null for standby. */
  workerUpMs: number | null;
  phases: Record<Phase, number[]>;
  delayed: number;
  load1: number;
}

export async function run(log: (line: string) => void = console.log): Promise<Record<string, unknown>> {
  const cleanup = new Cleanup();
  const deadline = new Deadline(TIME_LIMIT_MS);
  try {
    const redisServer = await startRedis();
    cleanup.add('redis', () => redisServer.stop());
    const dir = tempDir('sessiond-bench-takeover-', cleanup);
    const fakes = writeFakeAgents(join(dir, 'fakes'), KILL_MESSAGES);
    const rounds: RoundResult[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      for (const variant of ['replacement', 'standby'] as const) {
        const result = await oneRound({ url: redisServer.url, variant, round: r, fakes, cleanup, deadline });
        rounds.push(result);
        log(formatRound(result));
      }
    }
    const summary = (variant: RoundResult['variant']): Record<string, number> => {
      const mine = rounds.filter((x) => x.variant === variant);
      return Object.fromEntries(PHASES.map((p) => [p, round(median(mine.map((x) => Math.max(...x.phases[p]))), 0)]));
    };
    return {
      name,
      sessions: KILL_SESSIONS,
      rounds: ROUNDS,
      replacementMaxMs: summary('replacement'),
      standbyMaxMs: summary('standby'),
      load1: round(median(rounds.map((x) => x.load1)), 2),
    };
  } finally {
    await cleanup.run(log);
  }
}

function formatRound(r: RoundResult): string {
  const cell = (values: number[]): string =>
    `${Math.round(median(values))}/${Math.round(Math.max(...values))}`.padStart(11);
  const up = r.workerUpMs === null ? '' : ` worker up ${Math.round(r.workerUpMs)} ms;`;
  return (
    `  ${r.variant.padEnd(11)} (load ${r.load1.toFixed(2)};${up} ${r.delayed} requeued as delayed) ` +
    'median/max ms from the kill: ' +
    PHASES.map((p) => `${p} ${cell(r.phases[p])}`).join(' ')
  );
}

async function oneRound(init: {
  url: string;
  variant: RoundResult['variant'];
  round: number;
  fakes: ReturnType<typeof writeFakeAgents>;
  cleanup: Cleanup;
  deadline: Deadline;
}): Promise<RoundResult> {
  const { variant, fakes, cleanup, deadline } = init;
  const prefix = `bench-takeover-${init.round}-${variant}`;
  const workerOptions = {
    url: init.url,
    prefix,
    concurrency: 8,
    piCommand: fakes.nodeTurn,
    piArgs: ['--messages', String(KILL_MESSAGES), '--every', String(KILL_EVERY_MS)],
    stateDir: fakes.stateDir,
    agentDir: fakes.agentDir,
  };
  const fleet = await Fleet.start({ workers: 1, ...workerOptions }, 0, cleanup, deadline);
  const redis = new Redis(init.url);
  try {
    const ids = sessionIds(KILL_SESSIONS, `${prefix}-kill`);
    for (const sessionId of ids) await fleet.runtime.enqueue({ sessionId, prompt: PROMPT });
    for (const id of ids) {
      for (;;) {
        const view = await fleet.runtime.getSession(id);
        if (view !== null && view.lastSeq >= 4) break;
        await sleep(20);
      }
    }
    // The standby starts before the kill and takes nothing meanwhile: every session is held by the first worker.
    const standby = variant === 'standby' ? await WorkerProcess.start({ ...workerOptions }, cleanup) : null;
    const worker = fleet.workers[0];
    if (worker === undefined) throw new BenchFailure('no worker');
    const load1 = loadavg()[0] ?? 0;
    const killedAt = Date.now();
    process.kill(worker.pid, 'SIGKILL');
    let workerUpMs: number | null = null;
    let replacement: WorkerProcess | null = null;
    if (standby === null) {
      replacement = await WorkerProcess.start({ ...workerOptions, startTimeoutMs: deadline.cap(60_000) }, cleanup);
      workerUpMs = Date.now() - killedAt;
    }
    const firstOutput = new Map<string, number>();
    const spawned = new Map<string, number>();
    await withTimeout(
      (async () => {
        for (;;) {
          spawnScan(fakes.nodeTurn, killedAt, spawned);
          for (const id of ids) {
            if (firstOutput.has(id)) continue;
            const messages = await fleet.runtime.readMessages(id, 1, 1000);
            if (messages.some((m) => m.attempt > 1)) firstOutput.set(id, Date.now());
          }
          const states = await fleet.runtime.sessionStates(ids);
          if (ids.some((id) => states[id] === 'failed'))
            throw new BenchFailure(`a session failed: ${JSON.stringify(states)}`);
          if (ids.every((id) => states[id] === 'completed')) return;
          await sleep(POLL_MS);
        }
      })(),
      deadline.cap(120_000),
      'sessions to recover after kill -9',
    );
    const phases = Object.fromEntries(PHASES.map((p) => [p, [] as number[]])) as Record<Phase, number[]>;
    const events = await redis.xrange(`${partitionTag(prefix, 0)}:${QUEUE_NAME}:events`, String(killedAt), '+');
    let delayed = 0;
    for (const id of ids) {
      const mine = events
        .map(([entryId, fields]) => {
          const f = new Map<string, string>();
          for (let i = 0; i + 1 < fields.length; i += 2) f.set(fields[i] ?? '', fields[i + 1] ?? '');
          return { at: Number(entryId.split('-')[0]), event: f.get('event'), jobId: f.get('jobId') ?? '' };
        })
        .filter((e) => e.jobId.slice(0, e.jobId.lastIndexOf('.')) === id);
      const at = (event: string): number => mine.find((e) => e.event === event)?.at ?? Number.NaN;
      delayed += mine.filter((e) => e.event === 'delayed').length;
      const record = await fleet.runtime.getSession(id);
      const attempts = record?.context?.turn?.attempts ?? [];
      const values: Record<Phase, number> = {
        stalled: at('stalled'),
        active: at('active'),
        restored: attempts[0]?.endedAt ?? Number.NaN,
        attempt: attempts[1]?.startedAt ?? Number.NaN,
        spawned: spawned.get(id) ?? Number.NaN,
        firstOutput: firstOutput.get(id) ?? Number.NaN,
        completed: attempts.at(-1)?.endedAt ?? Number.NaN,
      };
      for (const p of PHASES) phases[p].push(values[p] - killedAt);
    }
    await (standby ?? replacement)?.stop();
    return { variant, workerUpMs, phases, delayed, load1 };
  } finally {
    redis.disconnect();
    await fleet.close();
  }
}

/** Clock ticks per second of /proc/<pid>/stat's start time (USER_HZ: 100 on Linux). */
const USER_HZ = 100;
let bootMs: number | null = null;

/** Epoch ms of the start of `pid` (10 ms resolution: /proc's), or null when gone. */
function startedAt(pid: number): number | null {
  try {
    // /proc/uptime has 10 ms resolution (/proc/stat's btime only whole seconds).
    bootMs ??= Date.now() - Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]) * 1000;
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const ticks = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
    return bootMs + (ticks * 1000) / USER_HZ;
  } catch {
    return null;
  }
}

/** The session an agent process runs for (its marker's last part), or null. */
function sessionOf(pid: number): string | null {
  try {
    const marker = readFileSync(`/proc/${pid}/environ`, 'utf8')
      .split('\0')
      .find((v) => v.startsWith('SESSIOND_AGENT_MARKER='));
    return marker === undefined ? null : marker.slice(marker.lastIndexOf('.') + 1);
  } catch {
    return null;
  }
}

/**
 * Notes in `spawned` the earliest start (from /proc, not from when it is seen) of a process running
 * `command` started after `since`, per session: the agent's spawn (its sandbox's first process).
 */
function spawnScan(command: string, since: number, spawned: Map<string, number>): void {
  for (const pid of processesMentioning(command)) {
    const at = startedAt(pid);
    if (at === null || at < since - 10) continue;
    const session = sessionOf(pid);
    if (session === null) continue;
    const known = spawned.get(session);
    if (known === undefined || at < known) spawned.set(session, at);
  }
}
