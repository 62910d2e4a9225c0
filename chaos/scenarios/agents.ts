/**
 * Scenario 3: agents that misbehave — crash, hang (a short idle timeout given per prompt), flood
 * stderr, print garbage, fail like a model API (500, 429, 401), ignore SIGINT and SIGTERM, run a
 * tool grandchild in its own session — some of them cancelled mid-run. Every turn must end in the
 * state its agent's behaviour calls for, with the failure category and the number of attempts the
 * retry policy gives, and nothing of theirs may stay alive.
 */
import type { FailureCategory } from '../../src/index.ts';
import { readLog } from '../checks.ts';
import type { Ledger, TurnExpectation } from '../ledger.ts';
import {
  check,
  sleep,
  waitFor,
  type ScenarioContext,
  type ScenarioDefinition,
  type ScenarioNotes,
} from '../scenario.ts';

const FAST = (maxAttempts: number) => ({
  maxAttempts,
  initialDelayMs: 100,
  multiplier: 1,
  maxDelayMs: 100,
  jitter: 'none',
});

interface Case {
  behaviour: string;
  expect: TurnExpectation;
  category?: FailureCategory;
  attempts?: number;
  retryPolicy?: Record<string, unknown>;
  options?: Record<string, unknown>;
  /** Cancel this long after the agent printed its first text. */
  cancelAfterMs?: number;
  /** A second prompt on the same session, after this one. */
  then?: Case;
  quick?: boolean;
}

const CASES: Case[] = [
  { behaviour: 'crash', expect: 'failed', category: 'process_crash', attempts: 2, retryPolicy: FAST(2), quick: true },
  { behaviour: 'crash@1', expect: 'completed', attempts: 2, retryPolicy: FAST(3) },
  {
    behaviour: 'hang',
    expect: 'failed',
    category: 'timeout',
    attempts: 2,
    retryPolicy: FAST(2),
    options: { idleTimeoutMs: 1000 },
    quick: true,
  },
  // 2 s: the agent's second attempt must not be taken for idle while it starts on a loaded machine.
  { behaviour: 'hang@1', expect: 'completed', attempts: 2, retryPolicy: FAST(3), options: { idleTimeoutMs: 2000 } },
  { behaviour: 'flood-stderr:8', expect: 'completed', attempts: 1, retryPolicy: FAST(1), quick: true },
  { behaviour: 'garbage', expect: 'completed', attempts: 1, retryPolicy: FAST(1), quick: true },
  {
    behaviour: 'fail:server_error',
    expect: 'failed',
    category: 'server_error',
    attempts: 3,
    retryPolicy: FAST(3),
    quick: true,
  },
  { behaviour: 'fail:auth', expect: 'failed', category: 'auth', attempts: 1, retryPolicy: FAST(3) },
  { behaviour: 'fail:rate_limited@1', expect: 'completed', attempts: 2, retryPolicy: FAST(3) },
  {
    behaviour: 'ignore-sigint',
    expect: 'cancelled',
    attempts: 1,
    retryPolicy: FAST(3),
    cancelAfterMs: 500,
    quick: true,
  },
  { behaviour: 'ignore-sigint:1500', expect: 'completed', attempts: 1, retryPolicy: FAST(1) },
  { behaviour: 'tool:60000', expect: 'cancelled', attempts: 1, retryPolicy: FAST(3), cancelAfterMs: 300, quick: true },
  { behaviour: 'ok:6000', expect: 'cancelled', attempts: 1, retryPolicy: FAST(3), cancelAfterMs: 500 },
  {
    behaviour: 'hang',
    expect: 'failed',
    category: 'timeout',
    attempts: 1,
    retryPolicy: FAST(1),
    options: { idleTimeoutMs: 1000 },
    then: { behaviour: 'ok:200', expect: 'completed', attempts: 1 },
  },
];

export const agents: ScenarioDefinition = {
  name: 'agents',
  title: 'agents that crash, hang, flood stderr, print garbage, fail, or ignore SIGINT (with cancels)',
  settleMs: 60_000,
  async run(ctx: ScenarioContext, ledger: Ledger, notes: ScenarioNotes) {
    const runtime = ctx.cluster.runtime;
    const cases = CASES.filter((c) => !ctx.quick || c.quick === true);
    const cancelLatency: Array<{ behaviour: string; ms: number }> = [];
    const violations: string[] = [];
    const garbageSessions: string[] = [];
    await Promise.all(
      cases.map(async (c) => {
        const { sessionId } = await ledger.enqueue(runtime, {
          behaviour: c.behaviour,
          expect: c.expect,
          ...(c.category ? { category: c.category } : {}),
          ...(c.attempts ? { attempts: c.attempts } : {}),
          ...(c.retryPolicy ? { retryPolicy: c.retryPolicy } : {}),
          ...(c.options ? { options: c.options } : {}),
        });
        if (c.behaviour === 'garbage') garbageSessions.push(sessionId);
        if (c.then !== undefined)
          await ledger.enqueue(runtime, {
            sessionId,
            behaviour: c.then.behaviour,
            expect: c.then.expect,
            ...(c.then.attempts ? { attempts: c.then.attempts } : {}),
          });
        if (c.cancelAfterMs === undefined) return;
        const streaming = await waitFor(
          async () =>
            (await runtime.readMessages(sessionId)).some((m) => m.type === 'assistant' || m.type === 'tool.call'),
          30_000,
        );
        if (streaming === null) {
          violations.push(`${sessionId} (${c.behaviour}): never started to answer; not cancelled`);
          return;
        }
        await sleep(c.cancelAfterMs);
        const at = Date.now();
        await ledger.cancel(runtime, sessionId, `chaos: cancel ${c.behaviour}`);
        const ended = await waitFor(
          async () => {
            const view = await runtime.getSession(sessionId);
            return view?.context?.turn?.status === 'cancelled' ? Date.now() : null;
          },
          20_000,
          50,
        );
        if (ended === null) violations.push(`${sessionId} (${c.behaviour}): not cancelled within 20 s of the cancel`);
        else cancelLatency.push({ behaviour: c.behaviour, ms: ended - at });
      }),
    );
    notes.did.push(
      `${cases.length} sessions with misbehaving agents: ${cases.map((c) => `${c.behaviour}${c.cancelAfterMs !== undefined ? ' + cancel' : ''}${c.then ? ` then ${c.then.behaviour}` : ''}`).join(', ')}`,
    );
    if (cancelLatency.length > 0)
      notes.found.push(`cancel → cancelled: ${cancelLatency.map((c) => `${c.behaviour} ${c.ms} ms`).join(', ')}`);
    // The SIGINT-ignoring agent goes through the whole three-stage stop: interrupt, 2 s, SIGKILL.
    for (const c of cancelLatency) {
      if (c.behaviour === 'ignore-sigint' && (c.ms < 1900 || c.ms > 10_000))
        violations.push(`ignore-sigint: cancelled after ${c.ms} ms; the three-stage stop takes 2 s (+ the SIGKILL)`);
    }
    notes.checks.push(
      check(
        'cancels of misbehaving agents take effect (three-stage stop for one that ignores SIGINT/SIGTERM)',
        violations,
        `${cancelLatency.length} cancels`,
      ),
    );

    // garbage: the junk lines are reported with the turn, not lost and not fatal.
    const junk: string[] = [];
    for (const id of garbageSessions) {
      await waitFor(
        async () => ((await runtime.getSession(id))?.context?.turn?.status === 'completed' ? true : null),
        30_000,
      );
      const terminal = (await readLog(runtime, id)).find((m) => m.type === 'terminal.completed');
      const lines = (terminal?.content as { invalid_output_lines?: unknown[] } | undefined)?.invalid_output_lines ?? [];
      if (lines.length === 0) junk.push(`${id}: terminal.completed does not report the garbage lines`);
      else
        notes.found.push(`garbage: completed, ${lines.length} invalid output line(s) reported in terminal.completed`);
    }
    notes.checks.push(check('garbage output is reported, not fatal', junk, `${garbageSessions.length} session(s)`));
  },
};
