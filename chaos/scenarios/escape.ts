/**
 * Scenario 6: agents whose tools try to outlive their attempt — a background job, a `setsid`
 * child, an `env -i setsid` child (no marker, no env, its own session and group) — in turns that
 * complete normally, turns cancelled mid-tool, and a turn whose worker is kill -9ed mid-tool
 * (reaped when a replacement worker starts on the host). Once each turn is recorded ended, none
 * of its tool's processes may be alive.
 */
import { readdirSync, readFileSync } from 'node:fs';
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

// The kill -9 may hit any session its worker drives: attempts are not counted, only the end state.
const FAST = { maxAttempts: 3, initialDelayMs: 100, multiplier: 1, maxDelayMs: 100, jitter: 'none' };

/** Live processes whose argv[0] the fake agent's escape tool set: `chaos-escape-<tag>`. */
function escapes(prefix = 'chaos-escape-'): Array<{ pid: number; name: string }> {
  const out: Array<{ pid: number; name: string }> = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const name = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0')[0] ?? '';
      const state = readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]?.[0];
      if (name.startsWith(prefix) && state !== 'Z') out.push({ pid: Number(entry), name });
    } catch {
      // gone
    }
  }
  return out;
}

const ended = (status: string | undefined) => status === 'completed' || status === 'failed' || status === 'cancelled';

export const escape: ScenarioDefinition = {
  name: 'escape',
  title: 'tools that try to outlive their attempt (cmd &, setsid, env -i setsid), with cancels and a worker kill -9',
  settleMs: 60_000,
  async run(ctx: ScenarioContext, ledger: Ledger, notes: ScenarioNotes) {
    const { cluster } = ctx;
    const runtime = cluster.runtime;
    const violations: string[] = [];
    const tagOf = (sessionId: string) => ledger.sessions.get(sessionId)?.prompts.at(-1)?.tag ?? '?';
    /** Waits for the session's turn to end, then looks for its tool's processes at once. */
    const leftAfterEnd = async (sessionId: string): Promise<void> => {
      const status = await waitFor(
        async () => {
          const s = (await runtime.getSession(sessionId))?.context?.turn?.status;
          return ended(s) ? s : null;
        },
        60_000,
        50,
      );
      if (status === null) return void violations.push(`${sessionId}: its turn did not end within 60 s`);
      const left = escapes(`chaos-escape-${tagOf(sessionId)}`);
      if (left.length > 0)
        violations.push(
          `${sessionId} (${status}): ${left.length} tool process(es) alive once the turn was recorded ${status}: ${left.map((p) => p.pid).join(', ')}`,
        );
    };

    const normal = await Promise.all(
      [1, 2, 3].map(() => ledger.enqueue(runtime, { behaviour: 'escape:300', expect: 'completed', retryPolicy: FAST })),
    );
    const cancelled = await Promise.all(
      [1, 2].map(() => ledger.enqueue(runtime, { behaviour: 'escape:20000', expect: 'cancelled', retryPolicy: FAST })),
    );
    const killed = await ledger.enqueue(runtime, {
      behaviour: 'escape:20000@1',
      expect: 'completed',
      attempts: 2,
      retryPolicy: FAST,
    });
    const started = async (sessionId: string) =>
      waitFor(() => (escapes(`chaos-escape-${tagOf(sessionId)}`).length === 3 ? true : null), 30_000, 50);

    const checks: Array<Promise<void>> = normal.map((s) => leftAfterEnd(s.sessionId));
    for (const s of cancelled) {
      if ((await started(s.sessionId)) === null) violations.push(`${s.sessionId}: its tool never started`);
      await ledger.cancel(runtime, s.sessionId, 'chaos: cancel mid-tool');
      checks.push(leftAfterEnd(s.sessionId));
    }
    if ((await started(killed.sessionId)) === null) violations.push(`${killed.sessionId}: its tool never started`);
    const lease = await internals(runtime).redis.get(internals(runtime).keys.session(killed.sessionId, 'lease'));
    const holder = lease === null ? undefined : cluster.liveWorkers().find((w) => lease.startsWith(`${w.workerId}#`));
    if (holder === undefined) violations.push(`${killed.sessionId}: no live worker holds it mid-tool`);
    else {
      await cluster.kill9(holder);
      const orphans = escapes(`chaos-escape-${tagOf(killed.sessionId)}`).length;
      await cluster.startWorker(holder.slot);
      const left = escapes(`chaos-escape-${tagOf(killed.sessionId)}`);
      notes.did.push(
        `kill -9 of worker ${holder.pid} mid-tool: ${orphans} tool process(es) outlived it; a replacement worker started`,
      );
      if (left.length > 0)
        violations.push(
          `${killed.sessionId}: ${left.length} tool process(es) of the killed worker alive after a replacement worker started`,
        );
    }
    checks.push(leftAfterEnd(killed.sessionId));
    await Promise.all(checks);
    await sleep(200);
    const anyLeft = escapes();
    if (anyLeft.length > 0)
      violations.push(
        `${anyLeft.length} escape process(es) alive at the end: ${anyLeft.map((p) => `${p.name} (${p.pid})`).join(', ')}`,
      );
    notes.did.push(
      `${normal.length} turns that complete with three escapes each, ${cancelled.length} cancelled mid-tool, 1 whose worker was killed mid-tool`,
    );
    notes.checks.push(
      check(
        'no process of an attempt outlives it (cmd &, setsid, env -i setsid)',
        violations,
        `${normal.length + cancelled.length + 1} sessions, 3 escapes each`,
      ),
    );
  },
};
