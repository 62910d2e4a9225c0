/**
 * Scenario 6: agents whose tools try to outlive their attempt — a background job, a `setsid`
 * child, an `env -i setsid` child (no marker, no env, its own session and group) — in turns that
 * complete normally, turns cancelled mid-tool, a turn stopped by its idle timeout mid-tool, and a
 * turn whose worker is kill -9ed mid-tool (reaped when a replacement worker starts on the host).
 * Once each turn is recorded ended, none of its tool's processes may be alive.
 *
 * `escape-bwrap`: the same, the workers restarted with SESSIOND_SANDBOX=bwrap; it also checks that
 * bubblewrap works on this host (failing with the reason when not, never passing unsandboxed), that
 * every worker reports bwrap, that every attempt is recorded as run in bwrap, and that the tools it
 * waited for ran in a PID namespace other than the host's.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
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
import { probeMode } from '../../src/process/index.ts';

// The kill -9 may hit any session its worker drives: attempts are not counted, only the end state.
const FAST = { maxAttempts: 3, initialDelayMs: 100, multiplier: 1, maxDelayMs: 100, jitter: 'none' };

/** The PID namespace of `pid` (`pid:[4026531836]`), null when unreadable. */
function pidNamespace(pid: number | 'self'): string | null {
  try {
    return readlinkSync(`/proc/${pid}/ns/pid`);
  } catch {
    return null; // gone, or not ours to read
  }
}

/** Live processes whose argv[0] the fake agent's escape tool set: `chaos-escape-<tag>`. */
function escapes(prefix = 'chaos-escape-'): Array<{ pid: number; name: string; pidns: string | null }> {
  const out: Array<{ pid: number; name: string; pidns: string | null }> = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const name = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0')[0] ?? '';
      const state = readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]?.[0];
      if (name.startsWith(prefix) && state !== 'Z')
        out.push({ pid: Number(entry), name, pidns: pidNamespace(Number(entry)) });
    } catch {
      // gone
    }
  }
  return out;
}

const ended = (status: string | undefined) => status === 'completed' || status === 'failed' || status === 'cancelled';

/** The body shared by `escape` and `escape-bwrap`; `sandboxed`: check the bwrap evidence too. */
async function run(ctx: ScenarioContext, ledger: Ledger, notes: ScenarioNotes, sandboxed: boolean): Promise<void> {
  const { cluster } = ctx;
  const runtime = cluster.runtime;
  const violations: string[] = [];
  /** Where the tools waited for ran: a session whose escapes share the host's PID namespace ran unsandboxed. */
  const unconfined: string[] = [];
  const hostPidns = pidNamespace('self');
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
  // One attempt: a timeout retried would start the escapes again; the check wants the first attempt's end.
  const idle = await ledger.enqueue(runtime, {
    behaviour: 'escape-hang',
    expect: 'failed',
    category: 'timeout',
    attempts: 1,
    retryPolicy: { ...FAST, maxAttempts: 1 },
    options: { idleTimeoutMs: 2000 },
  });
  const cancelled = await Promise.all(
    [1, 2].map(() => ledger.enqueue(runtime, { behaviour: 'escape:20000', expect: 'cancelled', retryPolicy: FAST })),
  );
  const killed = await ledger.enqueue(runtime, {
    behaviour: 'escape:20000@1',
    expect: 'completed',
    attempts: 2,
    retryPolicy: FAST,
  });
  /** Waits for the session's three escapes to run; with `sandboxed`, notes any seen in the host's PID namespace. */
  const started = async (sessionId: string) => {
    const seen = await waitFor(
      () => {
        const found = escapes(`chaos-escape-${tagOf(sessionId)}`);
        return found.length === 3 ? found : null;
      },
      30_000,
      50,
    );
    if (seen !== null && sandboxed && seen.some((p) => p.pidns === null || p.pidns === hostPidns))
      unconfined.push(
        `${sessionId}: its tool's processes ${seen.map((p) => `${p.pid} (${p.pidns ?? 'unreadable'})`).join(', ')} run in the host's PID namespace (${hostPidns ?? '?'})`,
      );
    return seen;
  };

  const checks: Array<Promise<void>> = normal.map((s) => leftAfterEnd(s.sessionId));
  if ((await started(idle.sessionId)) === null) violations.push(`${idle.sessionId}: its tool never started`);
  for (const s of cancelled) {
    if ((await started(s.sessionId)) === null) violations.push(`${s.sessionId}: its tool never started`);
    await ledger.cancel(runtime, s.sessionId, 'chaos: cancel mid-tool');
    checks.push(leftAfterEnd(s.sessionId));
  }
  // Ended before the kill -9 below, which may hit the worker driving it.
  await leftAfterEnd(idle.sessionId);
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
    `${normal.length} turns that complete with three escapes each, 1 stopped by its idle timeout mid-tool, ${cancelled.length} cancelled mid-tool, 1 whose worker was killed mid-tool`,
  );
  const sessions = normal.length + cancelled.length + 2;
  notes.checks.push(
    check(
      'no process of an attempt outlives it (cmd &, setsid, env -i setsid)',
      violations,
      `${sessions} sessions, 3 escapes each`,
    ),
  );
  if (!sandboxed) return;

  // Every attempt of every session recorded as run in bwrap (what `sessiond inspect` shows).
  const notBwrap: string[] = [];
  let attempts = 0;
  for (const id of ledger.ids()) {
    const recorded = (await runtime.getSession(id))?.context?.turn?.attempts ?? [];
    if (recorded.length === 0) notBwrap.push(`${id}: no attempt recorded`);
    for (const a of recorded) {
      attempts += 1;
      if (a.sandbox !== 'bwrap')
        notBwrap.push(`${id}: attempt ${a.attempt} ran with sandbox ${a.sandbox ?? '(none recorded)'}`);
    }
  }
  notes.checks.push(
    check(
      'every attempt ran in bwrap (its record, as inspect shows it)',
      notBwrap,
      `${attempts} attempts of ${ledger.ids().length} sessions, each recorded sandbox bwrap`,
    ),
  );
  notes.checks.push(
    check(
      "the tools ran in a PID namespace of their own, not the host's",
      unconfined,
      `the escapes of the ${cancelled.length + 2} sessions waited for mid-tool, each in a namespace other than ${hostPidns ?? '?'}`,
    ),
  );
}

export const escape: ScenarioDefinition = {
  name: 'escape',
  title:
    'tools that try to outlive their attempt (cmd &, setsid, env -i setsid), with cancels, an idle timeout and a worker kill -9',
  settleMs: 60_000,
  run: (ctx, ledger, notes) => run(ctx, ledger, notes, false),
};

export const escapeBwrap: ScenarioDefinition = {
  name: 'escape-bwrap',
  title: 'the escape scenario with every attempt in a bubblewrap sandbox (SESSIOND_SANDBOX=bwrap)',
  settleMs: 60_000,
  workerEnv: { SESSIOND_SANDBOX: 'bwrap' },
  async run(ctx, ledger, notes) {
    // Never a pass unsandboxed: without bubblewrap here the scenario fails, saying why.
    const problem = probeMode('bwrap');
    notes.checks.push(
      check(
        'bubblewrap makes a sandbox on this host',
        problem === null ? [] : [`bwrap is unavailable here (${problem}): this scenario runs only sandboxed`],
        problem === null ? 'probed: bwrap works' : 'not run',
      ),
    );
    if (problem !== null) return;
    const live = ctx.cluster.liveWorkers().map((w) => w.workerId);
    const reported = await waitFor(
      async () => {
        const beats = (await ctx.cluster.runtime.workers()).filter((b) => live.includes(b.id));
        return beats.length === live.length ? beats : null;
      },
      10_000,
      100,
    );
    const wrong = (reported ?? [])
      .filter((b) => b.sandbox?.mode !== 'bwrap' || b.sandbox.refused)
      .map((b) => `worker ${b.id} reports sandbox ${JSON.stringify(b.sandbox ?? null)}`);
    if (reported === null) wrong.push(`not every live worker (${live.join(', ')}) sent a heartbeat within 10 s`);
    notes.checks.push(
      check('every worker reports sandbox bwrap', wrong, `${live.length} workers, heartbeats with sandbox mode bwrap`),
    );
    await run(ctx, ledger, notes, true);
  },
};
