/**
 * The checks run after every chaos scenario. Each reads Redis through the runtime (Runtime /
 * SessionStore: the same reads `inspect` and `watch` use) and returns a CheckResult: its name, ok,
 * a one-line summary and the violations it found. None throws for a failed check.
 */
import { FINISHED_PROMPTS_KEPT } from '../machines/turn.ts';
import type { Runtime } from '../src/runtime/runtime.ts';
import { assistantText } from '../test/support/runtime.ts';
import type { StoredMessage } from '../src/runtime/store/session-store.ts';
import type { Cluster, ScannedProcess } from './cluster.ts';
import type { Ledger, LedgerSession } from './ledger.ts';
import type { WitnessReport } from './witness.ts';
import { internals } from '../src/runtime/internals.ts';
import { parseTurns, TURNS_FIELD } from '../src/runtime/workspace-turns.ts';

export interface CheckResult {
  name: string;
  ok: boolean;
  summary: string;
  violations: string[];
}

const FINAL = new Set(['completed', 'failed', 'cancelled']);
const MAX_LISTED = 12;

export function check(name: string, violations: string[], summary: string): CheckResult {
  return { name, ok: violations.length === 0, summary, violations };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Every message of a session's log, in order. */
export async function readLog(runtime: Runtime, sessionId: string): Promise<StoredMessage[]> {
  const all: StoredMessage[] = [];
  for (let from = 1; ;) {
    const batch = await runtime.readMessages(sessionId, from, 2000);
    all.push(...batch);
    const last = batch.at(-1);
    if (batch.length < 2000 || last === undefined) return all;
    from = last.seq + 1;
  }
}

/** Why a session is not settled yet (null when it is): its last prompt ran as a turn that ended, nothing is pending, nobody holds it. */
export async function unsettledReason(runtime: Runtime, session: LedgerSession): Promise<string | null> {
  const view = await runtime.getSession(session.sessionId);
  if (view === null) return 'lost: no such session in Redis';
  const expected = Math.max(0, ...session.prompts.map((p) => p.turn));
  const ctx = view.context;
  const turn = ctx?.turn ?? null;
  const parts: string[] = [];
  if ((ctx?.turnIndex ?? 0) < expected) parts.push(`turn ${ctx?.turnIndex ?? 0} of ${expected} started`);
  if (view.queued.length > 0) parts.push(`${view.queued.length} prompt(s) still in the inbox`);
  if ((ctx?.mailbox.length ?? 0) > 0) parts.push(`${ctx?.mailbox.length} prompt(s) in the mailbox`);
  if (turn !== null && !FINAL.has(turn.status)) parts.push(`turn ${turn.index} is ${turn.status}`);
  if (view.heldBy !== null) parts.push(`held by ${view.heldBy}`);
  if (view.cancelRequested) parts.push('a cancel is still pending');
  const active = await internals(runtime).store.activeJobId(session.sessionId);
  if (parts.length === 0 && active !== null) parts.push(`its activation ${active} has not ended`);
  if (parts.length === 0) return null;
  return `state ${view.state}, attempt ${ctx?.attempt ?? 0}: ${parts.join('; ')}`;
}

/**
 * No session lost or stuck: waits (up to `deadlineMs`) until every session of the ledger has run
 * all its prompts as turns that ended, with nothing pending (inbox, mailbox, cancel flag,
 * activation) and nobody holding it.
 */
export async function checkSettled(
  runtime: Runtime,
  ledger: Ledger,
  deadlineMs: number,
): Promise<CheckResult & { waitedMs: number }> {
  const started = Date.now();
  const sessions = [...ledger.sessions.values()];
  let pending: Array<{ id: string; why: string }> = [];
  for (;;) {
    pending = [];
    for (const session of sessions) {
      const why = await unsettledReason(runtime, session);
      if (why !== null) pending.push({ id: session.sessionId, why });
    }
    if (pending.length === 0 || Date.now() - started > deadlineMs) break;
    await sleep(250);
  }
  const waitedMs = Date.now() - started;
  const violations = pending
    .slice(0, MAX_LISTED)
    .map((p) => `${p.id}: ${p.why} (after ${Math.round(deadlineMs / 1000)} s)`);
  if (pending.length > MAX_LISTED) violations.push(`…and ${pending.length - MAX_LISTED} more`);
  return {
    ...check(
      'no session lost or stuck',
      violations,
      `${sessions.length} sessions, ${ledger.promptCount()} prompts; settled after ${(waitedMs / 1000).toFixed(1)} s`,
    ),
    waitedMs,
  };
}

/** Per (turn, attempt): its messages, and its terminal messages. */
function groupByAttempt(
  log: readonly StoredMessage[],
): Map<string, { turn: number; attempt: number; messages: StoredMessage[] }> {
  const groups = new Map<string, { turn: number; attempt: number; messages: StoredMessage[] }>();
  for (const m of log) {
    const key = `${m.turn}/${m.attempt}`;
    const group = groups.get(key) ?? { turn: m.turn, attempt: m.attempt, messages: [] };
    group.messages.push(m);
    groups.set(key, group);
  }
  return groups;
}

function isTerminal(m: StoredMessage): boolean {
  return m.type === 'terminal.completed' || m.type === 'terminal.failed';
}

/**
 * Every turn ended in exactly one of completed / failed / cancelled: every enqueued prompt became
 * a turn (the turn counter equals the prompts enqueued, each prompt ended once), the last turn's
 * record is consistent with its final state (and with what the scenario expected), the log
 * never shows a turn going on after it completed, and a workspace session's recorded turn ends
 * are those its log says completed.
 */
export async function checkTurns(runtime: Runtime, ledger: Ledger): Promise<CheckResult> {
  const violations: string[] = [];
  const outcomes = { completed: 0, failed: 0, cancelled: 0 };
  for (const session of ledger.sessions.values()) {
    const id = session.sessionId;
    const view = await runtime.getSession(id);
    if (view === null || view.context === null) {
      violations.push(`${id}: no session state in Redis`);
      continue;
    }
    const ctx = view.context;
    const expected = session.prompts.length;
    const meta = await internals(runtime).store.meta(id);
    if (Number(meta?.prompts ?? 0) !== expected)
      violations.push(`${id}: ${meta?.prompts} prompts counted by enqueue, ${expected} enqueued`);
    if (ctx.turnIndex !== expected) violations.push(`${id}: ${ctx.turnIndex} turns started for ${expected} prompts`);
    const finished = ctx.finishedPromptIds;
    if (new Set(finished).size !== finished.length)
      violations.push(`${id}: a prompt ended twice (finishedPromptIds has duplicates)`);
    if (finished.length !== Math.min(ctx.turnIndex, FINISHED_PROMPTS_KEPT))
      violations.push(`${id}: ${finished.length} prompts ended, ${ctx.turnIndex} turns started`);
    const turn = ctx.turn;
    if (turn === null) {
      if (expected > 0) violations.push(`${id}: no current turn after ${expected} prompts`);
      continue;
    }
    const status = turn.status;
    if (status !== 'completed' && status !== 'failed' && status !== 'cancelled') {
      violations.push(`${id}: turn ${turn.index} is ${status}, not ended`);
      continue;
    }
    outcomes[status] += 1;
    if (turn.endedAt === null) violations.push(`${id}: turn ${turn.index} is ${status} without an end time`);
    const completedAttempts = turn.attempts.filter((a) => a.outcome === 'completed').length;
    const last = turn.attempts.at(-1);
    if (turn.attempts.some((a) => a.outcome === null))
      violations.push(`${id}: turn ${turn.index} (${status}) has an attempt without an outcome`);
    if (status === 'completed' && (completedAttempts !== 1 || last?.outcome !== 'completed'))
      violations.push(
        `${id}: turn ${turn.index} completed but its attempts are ${JSON.stringify(turn.attempts.map((a) => a.outcome))}`,
      );
    if (
      status === 'failed' &&
      (completedAttempts !== 0 ||
        turn.failureReason === null ||
        (last?.outcome !== 'failed' && last?.outcome !== 'interrupted'))
    ) {
      violations.push(
        `${id}: turn ${turn.index} failed (${turn.failureReason}) but its attempts are ${JSON.stringify(turn.attempts.map((a) => a.outcome))}`,
      );
    }
    if (status === 'cancelled' && (completedAttempts !== 0 || turn.cancelReason === null))
      violations.push(
        `${id}: turn ${turn.index} cancelled but its attempts are ${JSON.stringify(turn.attempts.map((a) => a.outcome))}`,
      );
    const prompt = session.prompts.find((p) => p.turn === turn.index);
    if (prompt !== undefined) {
      if (prompt.text !== turn.text)
        violations.push(
          `${id}: turn ${turn.index} ran "${turn.text.slice(0, 60)}", but the prompt enqueued as turn ${turn.index} was "${prompt.text.slice(0, 60)}"`,
        );
      if (prompt.expect !== 'ended' && prompt.expect !== status)
        violations.push(
          `${id}: turn ${turn.index} ("${prompt.text.slice(0, 40)}") ended ${status}, expected ${prompt.expect} (attempts ${JSON.stringify(turn.attempts.map((a) => [a.outcome, a.category]))})`,
        );
      if (prompt.category !== undefined && status === 'failed' && last?.category !== prompt.category)
        violations.push(
          `${id}: turn ${turn.index} failed with category ${last?.category}, expected ${prompt.category}`,
        );
      if (prompt.attempts !== undefined && turn.attempts.length !== prompt.attempts)
        violations.push(`${id}: turn ${turn.index} took ${turn.attempts.length} attempts, expected ${prompt.attempts}`);
    }
    const log = await readLog(runtime, id);
    // The log and the state agree: a turn that did not complete has no completed answer in its log.
    if (status !== 'completed' && log.some((m) => m.turn === turn.index && m.type === 'terminal.completed'))
      violations.push(`${id}: turn ${turn.index} ended ${status}, but its log holds a terminal.completed`);
    // The workspace and the log agree: a turn's end is recorded (its point: files and conversation at its end) exactly
    // when its log says it completed (a cancel racing a completing turn must not keep one without the other).
    const points = parseTurns(await internals(runtime).store.agentState(id, TURNS_FIELD));
    const recorded = new Set(points.filter((p) => p.turn > 0).map((p) => p.turn));
    const completed = new Set(log.filter((m) => m.type === 'terminal.completed').map((m) => m.turn));
    for (const t of recorded)
      if (!completed.has(t))
        violations.push(`${id}: turn ${t}'s end is recorded in its workspace, but its log holds no terminal.completed`);
    // The newest points are kept (TURNS_KEPT): completed turns older than the oldest kept have none.
    const oldest = points[0]?.turn ?? Number.POSITIVE_INFINITY;
    for (const t of completed)
      if (t >= oldest && !recorded.has(t))
        violations.push(`${id}: turn ${t} completed, but its end is not recorded in its workspace`);
    // Earlier turns: the log is their only record. One that must have completed has a terminal.completed.
    for (const p of session.prompts) {
      if (p.turn === turn.index || p.expect !== 'completed') continue;
      if (!log.some((m) => m.turn === p.turn && m.type === 'terminal.completed'))
        violations.push(
          `${id}: turn ${p.turn} ("${p.text.slice(0, 40)}") was expected to complete; its log has no terminal.completed`,
        );
    }
  }
  const listed = violations.slice(0, MAX_LISTED * 2);
  if (violations.length > listed.length) listed.push(`…and ${violations.length - listed.length} more`);
  return check(
    'every turn ended in exactly one of completed / failed / cancelled',
    listed,
    `last turns: ${outcomes.completed} completed, ${outcomes.failed} failed, ${outcomes.cancelled} cancelled`,
  );
}

/**
 * Message logs whole and in order: seq is exactly 1..n (no gap, no duplicate) and matches the
 * session's seq counter; (turn, attempt) never goes backwards along the log (two drivers would
 * interleave their attempts); within an attempt the terminal message is the last one, and there is
 * at most one; no attempt follows a completed one in the same turn; each turn's answer carries the
 * tag of the prompt enqueued as that turn (every prompt ran, in order, once).
 */
export async function checkLogs(runtime: Runtime, ledger: Ledger): Promise<CheckResult> {
  const violations: string[] = [];
  let messages = 0;
  let attempts = 0;
  for (const session of ledger.sessions.values()) {
    const id = session.sessionId;
    const log = await readLog(runtime, id);
    messages += log.length;
    const lastSeq = await internals(runtime).store.lastSeq(id);
    const gap = log.findIndex((m, i) => m.seq !== i + 1);
    if (gap !== -1) violations.push(`${id}: seq ${log[gap]?.seq} at position ${gap + 1} (a gap or a duplicate)`);
    if (lastSeq !== log.length)
      violations.push(`${id}: the seq counter says ${lastSeq}, the log holds ${log.length} messages`);
    const view = await runtime.getSession(id);
    const turnIndex = view?.context?.turnIndex ?? 0;
    for (let i = 1; i < log.length; i++) {
      const a = log[i - 1];
      const b = log[i];
      if (a === undefined || b === undefined) continue;
      if (b.turn < a.turn || (b.turn === a.turn && b.attempt < a.attempt)) {
        violations.push(
          `${id}: (turn, attempt) went backwards at seq ${b.seq}: (${a.turn}, ${a.attempt}) then (${b.turn}, ${b.attempt})`,
        );
        break;
      }
    }
    const beyond = log.find((m) => m.turn > turnIndex || m.turn < 1 || m.attempt < 1);
    if (beyond !== undefined)
      violations.push(
        `${id}: message seq ${beyond.seq} has (turn ${beyond.turn}, attempt ${beyond.attempt}), beyond turn ${turnIndex}`,
      );
    const groups = groupByAttempt(log);
    attempts += groups.size;
    const completedAt = new Map<number, number>();
    for (const g of groups.values()) {
      const terminals = g.messages.filter(isTerminal);
      if (terminals.length > 1)
        violations.push(`${id}: turn ${g.turn} attempt ${g.attempt} has ${terminals.length} terminal messages`);
      const t = terminals[0];
      if (t !== undefined && g.messages.at(-1) !== t)
        violations.push(`${id}: turn ${g.turn} attempt ${g.attempt}: messages after its terminal (seq ${t.seq})`);
      if (t?.type === 'terminal.completed') completedAt.set(g.turn, g.attempt);
    }
    for (const g of groups.values()) {
      const done = completedAt.get(g.turn);
      if (done !== undefined && g.attempt > done)
        violations.push(`${id}: turn ${g.turn} has attempt ${g.attempt} after attempt ${done} completed`);
    }
    if (session.pi) continue;
    for (const p of session.prompts) {
      if (p.tag === null) continue;
      const text = assistantText(log.filter((m) => m.turn === p.turn));
      const tags = new Set([...text.matchAll(/\[([A-Za-z0-9_.:-]+)\]/g)].map((m) => m[1]));
      const foreign = [...tags].filter((t) => t !== p.tag);
      if (foreign.length > 0)
        violations.push(
          `${id}: turn ${p.turn} answered prompt(s) ${foreign.join(', ')}, but the prompt enqueued as turn ${p.turn} was ${p.tag}`,
        );
    }
  }
  const listed = violations.slice(0, MAX_LISTED * 2);
  if (violations.length > listed.length) listed.push(`…and ${violations.length - listed.length} more`);
  return check(
    'message logs: seq 1..n, (turn, attempt) never backwards, one terminal per attempt',
    listed,
    `${messages} messages in ${attempts} attempts`,
  );
}

/**
 * Never two workers driving one session: the witness's evidence (lease fences never go backwards;
 * no agent of a holder that lost its lease outlives the stale-holder grace; no two running workers
 * run agents for one session past it), plus the fence counter: every lease ever granted has a
 * higher fence than the one before.
 */
export async function checkSingleDriver(
  runtime: Runtime,
  ledger: Ledger,
  witness: WitnessReport,
): Promise<CheckResult> {
  const violations = [...witness.driverViolations];
  let acquisitions = 0;
  for (const id of ledger.ids()) {
    const fence = Number((await internals(runtime).redis.get(internals(runtime).keys.session(id, 'fence'))) ?? 0);
    acquisitions += fence;
    const lease = await internals(runtime).store.leaseHolder(id);
    if (lease !== null && Number(lease.slice(lease.lastIndexOf('#') + 1)) !== fence)
      violations.push(`${id}: lease ${lease} is not the last fence granted (${fence})`);
  }
  return check(
    'never two workers driving one session',
    violations,
    `${witness.samples} samples; ${acquisitions} leases granted, ${witness.takeovers} takeovers seen, ${witness.staleAgentsSeen} stale-holder agents (stopped within ${(witness.maxStaleStopMs / 1000).toFixed(1)} s)`,
  );
}

function describe(p: ScannedProcess): string {
  return `pid ${p.pid} (${p.kind}, ppid ${p.ppid}, state ${p.state}) "${p.cmdline.slice(0, 90)}"`;
}

/**
 * No agent process alive that should not be: once every session has settled, no process of the
 * run carries an agent marker (agents, and their tool grandchildren, e.g. `sleep` in its own
 * session) — waiting up to `deadlineMs` for stops in progress. Orphans of killed workers had to
 * be reaped meanwhile, and leftovers of ended agents gone within their grace (witness).
 */
export async function checkNoStrayProcesses(
  cluster: Cluster,
  witness: WitnessReport,
  deadlineMs: number,
): Promise<CheckResult> {
  const started = Date.now();
  let left: ScannedProcess[] = [];
  for (;;) {
    left = cluster.processes().filter((p) => p.kind === 'agent' || p.kind === 'tool');
    if (left.length === 0 || Date.now() - started > deadlineMs) break;
    await sleep(250);
  }
  const violations = left
    .slice(0, MAX_LISTED)
    .map(
      (p) => `still alive ${Math.round((Date.now() - started) / 1000)} s after every session settled: ${describe(p)}`,
    );
  violations.push(...witness.processViolations);
  return check(
    'no agent process alive that should not be',
    violations,
    `${witness.orphansSeen} orphaned agents of killed workers seen, each reaped within ${(witness.maxOrphanLifeMs / 1000).toFixed(1)} s; at most ${witness.maxAgents} agents at once`,
  );
}
