/**
 * Scenario 1: kill -9 of a random worker during attempts, over and over, with sessions in every
 * state (running, in backoff — held or parked in BullMQ's delayed set —, queued behind a running
 * turn, completed and idle), a real pi among them; a replacement worker is started each time (its
 * start reaps what the dead one left on the host).
 */
import { PI_SLOW_MODEL } from '../cluster.ts';
import type { Ledger, PromptSpec } from '../ledger.ts';
import { check, sleep, type ScenarioContext, type ScenarioDefinition, type ScenarioNotes } from '../scenario.ts';
import { internals } from '../../src/runtime/internals.ts';

/** Enough attempts that a turn hit by many kills still completes: the check expects every turn to complete. */
const POLICY = { maxAttempts: 100, initialDelayMs: 150, multiplier: 1.5, maxDelayMs: 1000, jitter: 'none' };
/** A backoff longer than the workers' holdBackoff (1.5 s): the job is parked until nextRetryAt. */
const PARK_POLICY = { maxAttempts: 100, initialDelayMs: 2500, multiplier: 1, maxDelayMs: 2500, jitter: 'none' };

type Kind = 'long' | 'short' | 'park' | 'queue' | 'tool' | 'stubborn' | 'pi';

function promptsFor(kind: Kind, ctx: ScenarioContext): Array<Omit<PromptSpec, 'sessionId'>> {
  const r = ctx.random;
  const piOptions = { provider: 'fake', model: PI_SLOW_MODEL, cwd: ctx.cluster.pi.cwd };
  switch (kind) {
    case 'long':
      return [{ behaviour: `ok:${r.int(1500, 4000)}`, expect: 'completed', retryPolicy: POLICY }];
    case 'short':
      return [{ behaviour: `ok:${r.int(100, 400)}`, expect: 'completed', retryPolicy: POLICY }];
    case 'park':
      return [{ behaviour: `fail:server_error@1`, expect: 'completed', retryPolicy: PARK_POLICY }];
    case 'queue':
      return [1, 2, 3].map(() => ({
        behaviour: `ok:${r.int(300, 1200)}`,
        expect: 'completed' as const,
        retryPolicy: POLICY,
      }));
    case 'tool':
      return [{ behaviour: `tool:${r.int(1000, 3000)}`, expect: 'completed', retryPolicy: POLICY }];
    case 'stubborn':
      return [{ behaviour: `ignore-sigint:${r.int(1000, 3000)}`, expect: 'completed', retryPolicy: POLICY }];
    case 'pi':
      return [
        {
          behaviour: `Count to eighteen, slowly (${r.int(1, 1e6)})`,
          pi: true,
          expect: 'completed',
          retryPolicy: POLICY,
          options: piOptions,
        },
      ];
  }
}

async function feed(ctx: ScenarioContext, ledger: Ledger, sessionId: string, kind: Kind): Promise<void> {
  const piOptions = { provider: 'fake', model: PI_SLOW_MODEL, cwd: ctx.cluster.pi.cwd };
  await Promise.all(
    promptsFor(kind, ctx).map((spec) => ledger.enqueue(ctx.cluster.runtime, { ...spec, sessionId }, piOptions)),
  );
}

/** The state class of each session now: running, backoff, queued (prompts waiting), idle (its last turn ended). */
async function stateClasses(
  ctx: ScenarioContext,
  ids: readonly string[],
  precise = false,
): Promise<Map<string, string>> {
  const runtime = ctx.cluster.runtime;
  const out = new Map<string, string>();
  const states = await runtime.sessionStates(ids);
  const inboxes = await Promise.all(
    ids.map((id) => internals(runtime).redis.llen(internals(runtime).keys.session(id, 'inbox'))),
  );
  const mailboxes = precise
    ? await Promise.all(ids.map(async (id) => (await runtime.getSession(id))?.context?.mailbox.length ?? 0))
    : [];
  ids.forEach((id, i) => {
    const state = states[id] ?? 'queued';
    const waiting = (inboxes[i] ?? 0) + (mailboxes[i] ?? 0) > 0;
    if (state === 'running' || state === 'cancelling') out.set(id, waiting ? 'running+queued' : 'running');
    else if (state === 'backoff') out.set(id, 'backoff');
    else if (state === 'queued' || waiting) out.set(id, 'queued');
    else out.set(id, `idle (${state})`);
  });
  return out;
}

export const kill9: ScenarioDefinition = {
  name: 'kill9',
  title: 'kill -9 of a random worker during attempts, with sessions in every state',
  settleMs: 120_000,
  async run(ctx: ScenarioContext, ledger: Ledger, notes: ScenarioNotes) {
    const { cluster, random } = ctx;
    const cycles = ctx.quick ? 8 : 52;
    const kinds: Kind[] = ctx.quick
      ? ['long', 'park', 'queue', 'tool', 'stubborn', 'pi']
      : ['long', 'long', 'long', 'short', 'park', 'park', 'queue', 'queue', 'tool', 'stubborn', 'pi', 'pi'];
    const sessions = kinds.map((kind) => ({ id: ledger.newSessionId(), kind }));
    await Promise.all(sessions.map((s) => feed(ctx, ledger, s.id, s.kind)));

    // Keep every session busy: a session whose last turn ended gets its next prompt(s).
    let feeding = true;
    const feeder = (async () => {
      while (feeding) {
        const classes = await stateClasses(
          ctx,
          sessions.map((s) => s.id),
        );
        for (const s of sessions) {
          if (!feeding) break;
          if (classes.get(s.id)?.startsWith('idle') === true && random.chance(0.6))
            await feed(ctx, ledger, s.id, s.kind);
        }
        await sleep(300);
      }
    })();

    const hits = new Map<string, number>();
    let killedAttempts = 0;
    let graceful = 0;
    const gracefulViolations: string[] = [];
    const graceEvery = ctx.quick ? 5 : 13;
    const started = Date.now();
    try {
      await sleep(1500);
      for (let cycle = 1; cycle <= cycles; cycle++) {
        // A random worker that drives something now (else any): kill -9 lands during attempts.
        const leases = await internals(cluster.runtime).redis.mget(
          ...sessions.map((s) => internals(cluster.runtime).keys.session(s.id, 'lease')),
        );
        const holders = new Set(
          leases.filter((l): l is string => l !== null).map((l) => l.slice(0, l.lastIndexOf('#'))),
        );
        const live = cluster.liveWorkers();
        const driving = live.filter((w) => holders.has(w.workerId));
        const victim = random.pick(driving.length > 0 ? driving : live);
        const classes = await stateClasses(
          ctx,
          sessions.map((s) => s.id),
          true,
        );
        for (const c of new Set(classes.values()))
          hits.set(c.replace(/ \(.*\)$/, ''), (hits.get(c.replace(/ \(.*\)$/, '')) ?? 0) + 1);
        const held = leases.filter((l) => l?.startsWith(`${victim.workerId}#`)).length;
        killedAttempts += held;
        await cluster.kill9(victim);
        // The replacement starts (and reaps what the dead one left) while the others go on.
        const [replacement] = await Promise.all([cluster.startWorker(victim.slot), sleep(random.int(300, 1200))]);
        if (cycle % graceEvery === 0) {
          // Now and then, a graceful restart too (SIGTERM: drain, stop, re-queue) of another worker.
          const other = random.pick(cluster.liveWorkers().filter((w) => w.slot !== victim.slot));
          const exit = await cluster.terminate(other);
          if (exit.code !== 0)
            gracefulViolations.push(`graceful shutdown of worker ${other.pid}: exit ${JSON.stringify(exit)}, not 0`);
          // A worker that shut down gracefully leaves no agent behind (nothing for a reaper to do).
          const records = await cluster.procRecords();
          const mine = new Set([...records.values()].filter((r) => r.workerPid === other.pid).map((r) => r.marker));
          const left = cluster.processes().filter((p) => p.marker !== null && mine.has(p.marker));
          if (left.length > 0)
            gracefulViolations.push(
              `graceful shutdown of worker ${other.pid} left ${left.length} agent process(es): ${left.map((p) => `${p.pid} "${p.cmdline.slice(0, 60)}"`).join(', ')}`,
            );
          await cluster.startWorker(other.slot);
          graceful += 1;
        }
        if (cycle % 10 === 0 || cycle === cycles)
          ctx.log(
            `  kill9: cycle ${cycle}/${cycles}: killed ${victim.pid} (held ${held} sessions), started ${replacement.pid}; states: ${[...classes.values()].join(', ')}`,
          );
      }
    } finally {
      feeding = false;
      await feeder;
    }
    const elapsed = ((Date.now() - started) / 1000).toFixed(0);
    notes.did.push(
      `${cycles} cycles in ${elapsed} s: kill -9 of a random worker (one driving a session when there was one), then a replacement started in its slot; ${graceful} graceful restart(s) (SIGTERM) of another worker in between; ${sessions.length} sessions (${kinds.join(', ')}) kept busy, ${ledger.promptCount()} prompts`,
    );
    notes.found.push(
      `the kills landed while sessions were ${[...hits.entries()].map(([c, n]) => `${c} (${n} kills)`).join(', ')}; ${killedAttempts} leases were held by the killed workers`,
    );
    const wanted = ['running', 'backoff', 'queued', 'idle'];
    const missing = wanted.filter((c) => ![...hits.keys()].some((k) => k.startsWith(c) || k.includes(c)));
    notes.checks.push(
      check(
        'graceful restarts in between end cleanly, leaving no agent behind',
        gracefulViolations,
        `${graceful} SIGTERM restart(s)`,
      ),
    );
    notes.checks.push(
      check(
        `${ctx.quick ? 8 : 50}+ kill -9 cycles, with sessions in every state`,
        ctx.quick ? [] : missing.map((c) => `no kill landed while a session was ${c}`),
        `${cycles} kills; states at kill time: ${[...hits.keys()].join(', ')}`,
      ),
    );
  },
};
