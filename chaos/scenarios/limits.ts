/**
 * Scenario 7: fleet limits under faults. The workers run with SESSIOND_LIMITS (two limits on two
 * models, maxConcurrent 3 and 2); racing sessions on those models run the one-request agent against
 * the fake model server, which counts requests in flight per model. Workers are kill -9ed while they
 * hold slots, and a 429 storm (Retry-After 2 s) hits one key: half its sessions take it as a
 * backoff with a shared cooldown, half (maxRetryAfterMs 1 s) as a quota wall, parked free. Checks,
 * besides the shared ones: never above a limit (the server's peak in flight per model), and no slot
 * leaked (every limit's holds and waiters back to zero within the lease time once all settled).
 */
import { parseLimits } from '../../src/runtime/limits/index.ts';
import { Runtime } from '../../src/runtime/runtime.ts';
import { TEST_POLICY } from '../../test/support/runtime.ts';
import type { ScriptStep } from '../../test/support/fake-model-server.ts';
import type { Ledger } from '../ledger.ts';
import {
  check,
  sleep,
  waitFor,
  type ScenarioContext,
  type ScenarioDefinition,
  type ScenarioNotes,
} from '../scenario.ts';
import { internals } from '../../src/runtime/internals.ts';

const A = 'limits-a';
const B = 'limits-b';
const LIMITS = [
  { name: 'limit-a', match: { model: A }, maxConcurrent: 3 },
  { name: 'limit-b', match: { model: B }, maxConcurrent: 2 },
] as const;
const MAX: Record<string, number> = { [A]: 3, [B]: 2 };
/** Kept short of the workers' 2 s lease: a killed worker's orphaned request ends before its slot lapses. */
const ANSWER_MS = 700;
const STORM_MS = 5000;
const SETTLE_MS = 180_000;

/** Enough attempts for turns hit by kills and the storm: every turn is expected to complete. */
const BACKOFF = { maxAttempts: 100, initialDelayMs: 200, multiplier: 1.5, maxDelayMs: 1500, jitter: 'none' };
/** Retry-After 2 s is past maxRetryAfterMs 1 s: a quota wall, parked free. */
const WALLED = { ...BACKOFF, maxRetryAfterMs: 1000 };

export const limits: ScenarioDefinition = {
  name: 'limits',
  title: 'racing sessions under fleet limits, with kill -9 of slot holders and a 429 storm',
  settleMs: SETTLE_MS,
  // Restarted with the limits before it runs; the scenarios after it get their workers back without them.
  workerEnv: { SESSIOND_LIMITS: JSON.stringify(LIMITS) },
  async run(ctx: ScenarioContext, ledger: Ledger, notes: ScenarioNotes) {
    const { cluster, random } = ctx;
    const parsed = parseLimits(LIMITS);
    if (!parsed.ok) throw new Error(JSON.stringify(parsed.errors));
    let stormUntil = 0;
    let tooMany = 0;
    const answer: ScriptStep = { text: 'Hello from the fake LLM.', headersDelayMs: ANSWER_MS, chunkDelayMs: 0 };
    cluster.model.setScript(A, () => {
      if (Date.now() < stormUntil) {
        tooMany += 1;
        return { status: 429, headers: { 'retry-after': '2' } };
      }
      return answer;
    });
    cluster.model.setScript(B, answer);
    notes.did.push(
      `the ${cluster.liveWorkers().length} workers run with SESSIOND_LIMITS ${JSON.stringify(LIMITS.map((l) => [l.name, l.maxConcurrent]))}`,
    );
    const runtime = new Runtime({
      connect: cluster.connect,
      prefix: cluster.prefix,
      policy: TEST_POLICY,
      fleetLimits: parsed.limits,
    });
    try {
      const perA = ctx.quick ? 12 : 60;
      const perB = ctx.quick ? 6 : 24;
      const kills = ctx.quick ? 2 : 5;
      const options = (model: string) => ({ provider: 'fake', model, cwd: cluster.pi.cwd });
      const specs = [
        ...Array.from({ length: perA }, (_, i) => ({ model: A, policy: i % 2 === 0 ? BACKOFF : WALLED })),
        ...Array.from({ length: perB }, () => ({ model: B, policy: BACKOFF })),
      ];
      // Racing: every session enqueued at once, in a random order.
      const order = specs.map((s) => ({ s, k: random.next() })).sort((x, y) => x.k - y.k);
      await Promise.all(
        order.map(({ s }, i) =>
          ledger.enqueue(
            cluster.runtime,
            {
              behaviour: `limits ${i}`,
              pi: true,
              expect: 'completed',
              retryPolicy: s.policy,
              options: options(s.model),
            },
            options(s.model),
          ),
        ),
      );
      notes.did.push(
        `enqueued ${perA} sessions on ${A} (half walled at a 429, half backing off) and ${perB} on ${B}, at once`,
      );
      // The storm, while the first of them run: every request on A is answered 429 until it ends.
      await sleep(1000);
      stormUntil = Date.now() + STORM_MS;
      notes.did.push(`a 429 storm (Retry-After 2 s) on ${A} for ${STORM_MS / 1000} s`);

      // kill -9 workers while they hold slots: a limited session running on them.
      let killedHolding = 0;
      for (let k = 0; k < kills; k += 1) {
        const victim = await waitFor(
          async () => {
            const ids = ledger.ids();
            const [leases, states] = await Promise.all([
              internals(cluster.runtime).redis.mget(
                ...ids.map((id) => internals(cluster.runtime).keys.session(id, 'lease')),
              ),
              cluster.runtime.sessionStates(ids),
            ]);
            const holding = new Map<string, number>();
            ids.forEach((id, i) => {
              const lease = leases[i];
              if (lease === null || lease === undefined || states[id] !== 'running') return;
              const worker = lease.slice(0, lease.lastIndexOf('#'));
              holding.set(worker, (holding.get(worker) ?? 0) + 1);
            });
            const candidates = cluster.liveWorkers().filter((w) => (holding.get(w.workerId) ?? 0) > 0);
            if (candidates.length === 0) return null;
            const chosen = random.pick(candidates);
            return { worker: chosen, held: holding.get(chosen.workerId) ?? 0 };
          },
          30_000,
          50,
        );
        if (victim === null) {
          notes.found.push(`kill ${k + 1}: no worker held a limited session within 30 s (all done?)`);
          break;
        }
        killedHolding += victim.held;
        await cluster.kill9(victim.worker);
        notes.did.push(`kill -9 of worker ${victim.worker.pid} while it ran ${victim.held} limited session(s)`);
        await Promise.all([cluster.startWorker(victim.worker.slot), sleep(random.int(500, 1500))]);
      }
      notes.found.push(`${killedHolding} limited attempts were running on the workers killed`);

      // Everything settles (the scenario's shared check waits too); then the limits must be empty.
      await waitFor(async () => {
        const states = await cluster.runtime.sessionStates(ledger.ids());
        return Object.values(states).every((s) => s === 'completed' || s === 'failed' || s === 'cancelled');
      }, SETTLE_MS);
      const settledAt = Date.now();
      const empty = await waitFor(
        async () => {
          const view = await runtime.limitsView();
          return view.limits.every((l) => l.inUse === 0 && l.waiting === 0) ? view : null;
        },
        3000 + 2000,
        100,
      );
      const view = await runtime.limitsView();
      const leaked = view.limits
        .filter((l) => l.inUse !== 0 || l.waiting !== 0)
        .map((l) => `${l.name}: ${l.inUse} in use, ${l.waiting} waiting after everything settled`);
      notes.checks.push(
        check(
          'no slot leaked',
          leaked,
          empty === null
            ? 'holds or waiters left'
            : `every limit back to 0 in use, 0 waiting, ${Date.now() - settledAt} ms after the last session settled`,
        ),
      );

      const over: string[] = [];
      const figures: string[] = [];
      for (const model of [A, B]) {
        const peak = cluster.model.peakInFlight(model);
        const max = MAX[model] ?? 0;
        figures.push(
          `${model}: peak ${peak} in flight (limit ${max}), ${cluster.model.requestsFor(model).length} requests`,
        );
        if (peak > max) over.push(`${model}: ${peak} requests in flight at once, above its limit of ${max}`);
      }
      notes.checks.push(check('never above a limit', over, figures.join('; ')));

      let walls = 0;
      let parkedFree = 0;
      for (const id of ledger.ids()) {
        const turn = (await cluster.runtime.getSession(id))?.context?.turn;
        for (const a of turn?.attempts ?? []) {
          if (a.quotaWall !== undefined) walls += 1;
          if (a.quotaWall === 'free') parkedFree += 1;
        }
      }
      const stormRequests = cluster.model
        .requestsFor(A)
        .filter((r) => r.at >= stormUntil - STORM_MS && r.at < stormUntil).length;
      notes.found.push(
        `${stormRequests} requests on ${A} during the ${STORM_MS / 1000} s storm (${tooMany} answered 429; the key's shared cooldown holds the others back); ${walls} attempts hit a quota wall (${parkedFree} free)`,
      );
    } finally {
      await runtime.close();
    }
  },
};
