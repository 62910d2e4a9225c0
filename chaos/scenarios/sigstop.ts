/**
 * Scenario 5: a worker whose event loop is blocked past its lock — double delivery. A worker that
 * drives sessions is frozen with SIGSTOP for longer than the lease TTL: its leases and BullMQ locks
 * run out, the stalled jobs are delivered again to the other workers, which take the sessions over
 * (the attempt that was running is recorded as interrupted and retried). Then it is thawed with
 * SIGCONT: its renewals fail, so it must write nothing more about those sessions, stop its agents,
 * and give up (log the session released as `stale`), while the new holders finish the turns.
 */
import { readLog } from '../checks.ts';
import type { ManagedWorker } from '../cluster.ts';
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

const POLICY = { maxAttempts: 10, initialDelayMs: 100, multiplier: 1, maxDelayMs: 100, jitter: 'none' };

interface Held {
  sessionId: string;
  turn: number;
  attempt: number;
  markers: string[];
}

function holderOf(token: string | null): string | null {
  return token === null ? null : token.slice(0, token.lastIndexOf('#'));
}

export const sigstop: ScenarioDefinition = {
  name: 'sigstop',
  title: 'a worker frozen (SIGSTOP) past its lease, then thawed: double delivery',
  settleMs: 60_000,
  async run(ctx: ScenarioContext, ledger: Ledger, notes: ScenarioNotes) {
    const { cluster, random } = ctx;
    const runtime = cluster.runtime;
    const rounds = ctx.quick ? 1 : 3;
    const violations: string[] = [];
    const found: string[] = [];
    for (let round = 1; round <= rounds; round++) {
      const ids: string[] = [];
      for (const behaviour of ['ok:9000', 'ok:8000', 'tool:8000', 'ignore-sigint:8000', 'ok:7000', 'ok:9000']) {
        const { sessionId } = await ledger.enqueue(runtime, { behaviour, expect: 'completed', retryPolicy: POLICY });
        ids.push(sessionId);
      }
      // A worker that drives sessions whose agents are running.
      const chosen = await waitFor(async () => {
        const [leases, records] = await Promise.all([
          internals(runtime).redis.mget(...ids.map((id) => internals(runtime).keys.session(id, 'lease'))),
          cluster.procRecords(),
        ]);
        const candidates: Array<{ worker: ManagedWorker; held: Held[] }> = [];
        for (const worker of cluster.liveWorkers()) {
          const held: Held[] = [];
          for (const [i, id] of ids.entries()) {
            if (holderOf(leases[i] ?? null) !== worker.workerId) continue;
            const recs = [...records.values()].filter(
              (r) => r.sessionId === id && r.workerPid === worker.pid && r.pid !== null,
            );
            if (recs.length === 0) continue;
            const view = await runtime.getSession(id);
            held.push({
              sessionId: id,
              turn: view?.context?.turnIndex ?? 0,
              attempt: view?.context?.attempt ?? 0,
              markers: recs.map((r) => r.marker),
            });
          }
          if (held.length > 0) candidates.push({ worker, held });
        }
        // The one that drives the most sessions (ties: any of them).
        const most = Math.max(0, ...candidates.map((c) => c.held.length));
        return candidates.length === 0 ? null : random.pick(candidates.filter((c) => c.held.length === most));
      }, 30_000);
      if (chosen === null) {
        violations.push(`round ${round}: no worker was driving a session with a running agent within 30 s`);
        continue;
      }
      const { worker, held } = chosen;
      await sleep(random.int(200, 800));
      const stoppedAt = Date.now();
      cluster.sigstop(worker);
      // Frozen: its leases and locks run out; the stalled jobs go to the other workers.
      const takenOver = await waitFor(
        async () => {
          const leases = await internals(runtime).redis.mget(
            ...held.map((h) => internals(runtime).keys.session(h.sessionId, 'lease')),
          );
          const views = await Promise.all(held.map((h) => runtime.getSession(h.sessionId)));
          // Taken over: another worker holds it and runs a later attempt (or it is already done).
          return held.every((h, i) => {
            const holder = holderOf(leases[i] ?? null);
            const ctxNow = views[i]?.context;
            const later = (ctxNow?.turnIndex ?? 0) > h.turn || (ctxNow?.attempt ?? 0) > h.attempt;
            return later && holder !== worker.workerId;
          })
            ? Date.now()
            : null;
        },
        30_000,
        100,
      );
      if (takenOver === null)
        violations.push(
          `round ${round}: the sessions of the frozen worker ${worker.pid} were not taken over within 30 s`,
        );
      // Let the new holders' attempts run a little, then thaw it.
      await sleep(1000);
      const frozenMs = Date.now() - stoppedAt;
      const seqAtThaw = new Map<string, number>();
      for (const h of held) seqAtThaw.set(h.sessionId, await internals(runtime).store.lastSeq(h.sessionId));
      cluster.sigcont(worker);
      const thawedAt = Date.now();
      // It must stop its agents (their whole trees) and give the sessions up as stale.
      const agentsGone = await waitFor(
        () =>
          cluster.processes().some((p) => p.marker !== null && held.some((h) => h.markers.includes(p.marker ?? '')))
            ? null
            : Date.now(),
        20_000,
        100,
      );
      if (agentsGone === null)
        violations.push(`round ${round}: the thawed worker ${worker.pid} did not stop its agents within 20 s`);
      const staleLogged = await waitFor(
        () => {
          const out = worker.proc.output();
          return held.every((h) => new RegExp(`"sessionId":"${h.sessionId}"[^\\n]*"outcome":"stale"`).test(out))
            ? true
            : null;
        },
        20_000,
        200,
      );
      if (staleLogged === null)
        violations.push(
          `round ${round}: the thawed worker ${worker.pid} did not report every session it lost as released stale:\n${worker.proc
            .output()
            .split('\n')
            .filter((l) => held.some((h) => l.includes(h.sessionId)))
            .slice(-6)
            .join('\n')}`,
        );
      // Nothing it wrote landed: no message of its attempt after the takeover's first message.
      for (const h of held) {
        await waitFor(
          async () => ((await runtime.getSession(h.sessionId))?.context?.turn?.status === 'completed' ? true : null),
          40_000,
          250,
        );
        const log = await readLog(runtime, h.sessionId);
        const firstLater = log.find((m) => m.turn > h.turn || (m.turn === h.turn && m.attempt > h.attempt));
        const late = log.filter(
          (m) => m.turn === h.turn && m.attempt === h.attempt && firstLater !== undefined && m.seq > firstLater.seq,
        );
        if (late.length > 0)
          violations.push(
            `${h.sessionId}: ${late.length} message(s) of the frozen worker's attempt ${h.attempt} were written after the new holder's (seq ${late[0]?.seq})`,
          );
        const view = await runtime.getSession(h.sessionId);
        const attempts = view?.context?.turn?.index === h.turn ? (view.context.turn.attempts ?? []) : [];
        const frozenAttempt = attempts.find((a) => a.attempt === h.attempt);
        if (frozenAttempt !== undefined && frozenAttempt.outcome !== 'interrupted')
          violations.push(
            `${h.sessionId}: the frozen worker's attempt ${h.attempt} is recorded ${frozenAttempt.outcome}, not interrupted`,
          );
        const wroteAfterThaw = log.filter(
          (m) => m.seq > (seqAtThaw.get(h.sessionId) ?? 0) && m.turn === h.turn && m.attempt === h.attempt,
        ).length;
        if (wroteAfterThaw > 0)
          violations.push(`${h.sessionId}: ${wroteAfterThaw} message(s) of the frozen attempt written after the thaw`);
      }
      found.push(
        `round ${round}: worker ${worker.pid} frozen ${(frozenMs / 1000).toFixed(1)} s while driving ${held.length} session(s); taken over after ${takenOver === null ? '—' : ((takenOver - stoppedAt) / 1000).toFixed(1)} s; thawed, its agents gone ${agentsGone === null ? '—' : `${agentsGone - thawedAt} ms`} later, sessions released as stale: ${staleLogged === null ? 'no' : 'yes'}`,
      );
    }
    notes.did.push(
      `${rounds} round(s): 6 long sessions, SIGSTOP of a worker driving some of them until the others took them over (> lease TTL 2 s), then SIGCONT`,
    );
    notes.found.push(...found);
    notes.checks.push(
      check(
        'a thawed stale holder writes nothing more, stops its agents and gives up',
        violations,
        `${rounds} round(s)`,
      ),
    );
  },
};
