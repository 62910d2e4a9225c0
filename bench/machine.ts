import { performance } from 'node:perf_hooks';
import { waitFor } from 'xstate';
import { persistSession, startSessionActor, type PersistedSession, type SessionActor } from '../machines/restore.ts';
import { CONTINUATION_PROMPT } from '../machines/retry-request.ts';
import { createSessionMachine, type SessionMachine } from '../machines/session.machine.ts';
import type { AttemptMeta, AttemptRequest, AttemptRunner, MessageSink, TurnStatus } from '../machines/types.ts';
import { isAgentTerminal, isTerminal, type AgentTerminalMessage, type CliMessage } from '../src/protocol/index.ts';
import { decideRetry, parseRetryPolicy, type RetryPolicy } from '../src/retry/index.ts';
import { BenchFailure } from './support/benchmark.ts';
import { collectGarbage, median, round, type Timing } from './support/timing.ts';

/**
 * The session machine's overhead: TURNS turns of MESSAGES_PER_ATTEMPT messages
 * each from an in-process fake provider (an async generator of prebuilt
 * messages, so nearly all the time measured is orchestration), run through one
 * session actor, against the loop a user would write instead (iterate the
 * provider, await the sink, keep the status and the attempt count, ask the same
 * `decideRetry`, wait the delay with the same setTimeout). Both sides use the
 * same provider, the same sink, the same policy and see the same messages.
 *
 * Every FAIL_EVERY-th turn's first attempt fails with a retryable
 * `server_error` (delays 0 ms, no jitter), so the retry path is exercised.
 * Prompts go in one at a time, each awaited (`waitFor`) before the next: a
 * chat user waits for the answer. A second, informational figure sends all
 * prompts at once into the actor's mailbox.
 *
 * Then the memory of IDLE_ACTORS idle actors restored from persisted
 * snapshots (one finished turn each, JSON round-tripped).
 */
export const name = 'machine';

const TURNS = 10_000;
const MESSAGES_PER_ATTEMPT = 200;
const FAIL_EVERY = 10;
const TOOL_PAIRS = 2;
const REPETITIONS = 5;
const IDLE_ACTORS = 1_000;
const MEMORY_REPETITIONS = 3;
const TARGET_RATIO = 0.3;
const PROMPT_TEXT = 'Refactor the session store and run the tests.';
const ENDED: ReadonlySet<TurnStatus> = new Set(['completed', 'failed', 'cancelled']);

const POLICY: RetryPolicy = (() => {
  const result = parseRetryPolicy({ initialDelayMs: 0, maxDelayMs: 0, jitter: 'none' });
  if (!result.ok) throw new Error(`bench policy: ${JSON.stringify(result.errors)}`);
  return result.policy;
})();

/** Turns whose first attempt fails; the retry then completes. */
const failsFirst = (turn: number): boolean => turn % FAIL_EVERY === 0;

// ---------------------------------------------------------------- the fake provider and the sink

/** What comes between the session message and the terminal one: assistant deltas with TOOL_PAIRS tool call/completed pairs spread in. */
const BODY: readonly CliMessage[] = (() => {
  const body: CliMessage[] = [];
  const length = MESSAGES_PER_ATTEMPT - 2;
  const every = Math.floor(length / (TOOL_PAIRS + 1));
  let tools = 0;
  while (body.length < length) {
    if (tools < TOOL_PAIRS && body.length > 0 && body.length % every === 0 && body.length + 2 <= length) {
      tools += 1;
      const toolCallId = `call_${tools}`;
      body.push({ type: 'tool.call', content: { toolCallId, name: 'bash', arguments: { command: 'npx vitest run' } } });
      body.push({ type: 'tool.completed', content: { toolCallId, name: 'bash', result: 'Tests 42 passed (42)' } });
    } else {
      body.push({ type: 'assistant', content: { text: `delta ${body.length} of the answer; ` } });
    }
  }
  return body;
})();

const COMPLETED: AgentTerminalMessage = { type: 'terminal.completed', content: { stopReason: 'stop' } };
const SERVER_ERROR: AgentTerminalMessage = {
  type: 'terminal.failed',
  content: {
    text: '500 Internal Server Error',
    category: 'server_error',
    stderr: '',
    invalid_output_lines: [],
    promptRecorded: true,
  },
};

/** The in-process provider: one async generator per attempt, MESSAGES_PER_ATTEMPT messages, ending in exactly one terminal message. */
const fakeProvider: AttemptRunner = async function* (request) {
  const sessionId = request.agentSessionId ?? `agent-${request.sessionId}`;
  yield request.agentSessionId === null
    ? { type: 'session.started', content: { sessionId } }
    : { type: 'session.resumed', content: { sessionId } };
  for (const message of BODY) yield message;
  yield request.attempt === 1 && failsFirst(request.turn) ? SERVER_ERROR : COMPLETED;
};

/** Appends to a log that is reset after each attempt, and counts (the checks are made after the timed run). */
class CountingSink {
  log: CliMessage[] = [];
  messages = 0;
  attempts = 0;
  completedAttempts = 0;
  failedAttempts = 0;
  retryAttempts = 0;
  /** Attempts whose message count was not MESSAGES_PER_ATTEMPT or whose terminal was not last. */
  badAttempts = 0;

  sink: MessageSink = (message: CliMessage, meta: AttemptMeta): void => {
    this.messages += 1;
    this.log.push(message);
    if (message.type === 'terminal.completed' || message.type === 'terminal.failed') {
      if (this.log.length !== MESSAGES_PER_ATTEMPT) this.badAttempts += 1;
      this.attempts += 1;
      if (message.type === 'terminal.completed') this.completedAttempts += 1;
      else this.failedAttempts += 1;
      if (meta.attempt > 1) this.retryAttempts += 1;
      this.log.length = 0;
    }
  };
}

/** What each side reports about the turns it ran. */
class TurnTally {
  completed = 0;
  failed = 0;
  cancelled = 0;
  retried = 0;
  /** Turns whose attempt count was not the expected one (2 for a failing first attempt, else 1). */
  wrongAttempts = 0;

  add(turn: number, status: TurnStatus, attempts: number): void {
    if (status === 'completed') this.completed += 1;
    else if (status === 'failed') this.failed += 1;
    else this.cancelled += 1;
    if (attempts > 1) this.retried += 1;
    if (attempts !== (failsFirst(turn) ? 2 : 1)) this.wrongAttempts += 1;
  }
}

// ---------------------------------------------------------------- the two measured paths

/** One session actor; each prompt is sent once the previous turn has ended. */
async function runMachine(machine: SessionMachine): Promise<{ sink: CountingSink; tally: TurnTally }> {
  const { sink, actor } = current(machine);
  const tally = new TurnTally();
  for (let i = 1; i <= TURNS; i += 1) {
    const id = `p${i}`;
    actor.send({ type: 'session.prompt', prompt: { id, text: PROMPT_TEXT } });
    const snapshot = await waitFor(actor, (s) => s.context.turn?.promptId === id && ENDED.has(s.context.turn.status));
    const turn = snapshot.context.turn;
    if (turn === null) throw new BenchFailure(`machine: no turn after prompt ${id}`);
    tally.add(turn.index, turn.status, turn.attempts.length);
    // The machine's own record of the retry must match what happened.
    if (
      failsFirst(turn.index) &&
      (turn.attempts[0]?.outcome !== 'failed' ||
        turn.attempts[0]?.category !== 'server_error' ||
        turn.attempts[0]?.delayMs !== 0)
    ) {
      throw new BenchFailure(
        `machine: turn ${turn.index}: first attempt recorded as ${JSON.stringify(turn.attempts[0])}`,
      );
    }
  }
  const context = actor.getSnapshot().context;
  actor.stop();
  if (context.turnIndex !== TURNS) throw new BenchFailure(`machine: turnIndex ${context.turnIndex}, expected ${TURNS}`);
  return { sink, tally };
}

/** One session actor; all prompts sent at once into its mailbox, then wait for the last turn. Informational. */
async function runMachineMailbox(machine: SessionMachine): Promise<{ sink: CountingSink; tally: TurnTally }> {
  const { sink, actor } = current(machine);
  for (let i = 1; i <= TURNS; i += 1)
    actor.send({ type: 'session.prompt', prompt: { id: `p${i}`, text: PROMPT_TEXT } });
  const last = `p${TURNS}`;
  const snapshot = await waitFor(actor, (s) => s.context.turn?.promptId === last && ENDED.has(s.context.turn.status));
  actor.stop();
  const context = snapshot.context;
  if (context.turnIndex !== TURNS || context.mailbox.length !== 0) {
    throw new BenchFailure(
      `machine (mailbox): turnIndex ${context.turnIndex}, mailbox ${context.mailbox.length}; expected ${TURNS}, 0`,
    );
  }
  // Turns end and the next starts within one macrostep, so no snapshot shows each ended turn: tally from the sink.
  const tally = new TurnTally();
  tally.completed = sink.completedAttempts;
  tally.retried = sink.retryAttempts;
  return { sink, tally };
}

let machineSink = new CountingSink();
const benchMachine = createSessionMachine(fakeProvider, (message, meta) => machineSink.sink(message, meta));

/** A new sink and a new session actor (the machine is created once: the sink it calls is swapped per run). */
function current(machine: SessionMachine): { sink: CountingSink; actor: SessionActor } {
  machineSink = new CountingSink();
  return { sink: machineSink, actor: startSessionActor(machine, { input: { sessionId: 'bench', policy: POLICY } }) };
}

/** The hand-written equivalent: no actor, the same provider, sink, retry decision and delay handling. */
async function runBaseline(): Promise<{ sink: CountingSink; tally: TurnTally }> {
  const sink = new CountingSink();
  const tally = new TurnTally();
  const session: HandSession = { sessionId: 'bench', agentSessionId: null, resumable: false };
  for (let i = 1; i <= TURNS; i += 1) {
    const turn = await runTurnByHand(fakeProvider, sink.sink, POLICY, session, i, { id: `p${i}`, text: PROMPT_TEXT });
    tally.add(i, turn.status, turn.attempts);
  }
  return { sink, tally };
}

interface HandSession {
  sessionId: string;
  agentSessionId: string | null;
  /** The agent's session holds a prompt, so the next attempt resumes it. */
  resumable: boolean;
}

async function runTurnByHand(
  runner: AttemptRunner,
  sink: MessageSink,
  policy: RetryPolicy,
  session: HandSession,
  turn: number,
  prompt: { id: string; text: string },
): Promise<{ status: TurnStatus; attempts: number }> {
  let promptRecorded = false;
  for (let attempt = 1; ; attempt += 1) {
    const agentSessionId = session.resumable ? session.agentSessionId : null;
    const continuation = promptRecorded && agentSessionId !== null;
    const request: AttemptRequest = {
      sessionId: session.sessionId,
      turn,
      attempt,
      promptId: prompt.id,
      text: continuation ? CONTINUATION_PROMPT : prompt.text,
      continuation,
      agentSessionId,
      options: {},
    };
    const meta: AttemptMeta = { sessionId: session.sessionId, turn, attempt };
    const controller = new AbortController();
    let terminal: AgentTerminalMessage | null = null;
    try {
      for await (const message of runner(request, { signal: controller.signal })) {
        await sink(message, meta);
        if (message.type === 'session.started' || message.type === 'session.resumed')
          session.agentSessionId = message.content.sessionId;
        else if (isAgentTerminal(message)) terminal = message;
      }
    } catch (error) {
      terminal = crashed(`the provider threw: ${error instanceof Error ? error.message : String(error)}`);
    }
    terminal ??= crashed('the provider ended without a terminal message');
    if (terminal.type === 'terminal.completed') {
      session.resumable = true;
      return { status: 'completed', attempts: attempt };
    }
    promptRecorded = terminal.content.promptRecorded === true;
    if (promptRecorded) session.resumable = true;
    const decision = decideRetry(policy, terminal.content, attempt);
    if (!decision.retry) return { status: 'failed', attempts: attempt };
    // As the machine's `after`: a timer even for 0 ms.
    await new Promise<void>((resolve) => setTimeout(resolve, decision.delayMs));
  }
}

function crashed(text: string): AgentTerminalMessage {
  return {
    type: 'terminal.failed',
    content: { text, category: 'process_crash', stderr: '', invalid_output_lines: [] },
  };
}

// ---------------------------------------------------------------- checks and timing

/** The counts every run must show; throws when one is off. */
function check(side: string, result: { sink: CountingSink; tally: TurnTally }, perTurn = true): void {
  const { sink, tally } = result;
  const failing = Math.floor(TURNS / FAIL_EVERY);
  const attempts = TURNS + failing;
  const problems: string[] = [];
  if (sink.badAttempts !== 0)
    problems.push(
      `${sink.badAttempts} attempts did not bring exactly ${MESSAGES_PER_ATTEMPT} messages ending in their terminal`,
    );
  if (sink.attempts !== attempts) problems.push(`sink saw ${sink.attempts} attempts, expected ${attempts}`);
  if (sink.messages !== attempts * MESSAGES_PER_ATTEMPT)
    problems.push(`sink saw ${sink.messages} messages, expected ${attempts * MESSAGES_PER_ATTEMPT}`);
  if (sink.completedAttempts !== TURNS)
    problems.push(`${sink.completedAttempts} terminal.completed, expected ${TURNS}`);
  if (sink.failedAttempts !== failing) problems.push(`${sink.failedAttempts} terminal.failed, expected ${failing}`);
  if (sink.retryAttempts !== failing) problems.push(`${sink.retryAttempts} retry attempts, expected ${failing}`);
  if (tally.completed !== TURNS) problems.push(`${tally.completed} turns completed, expected ${TURNS}`);
  if (tally.failed + tally.cancelled !== 0)
    problems.push(`${tally.failed} turns failed and ${tally.cancelled} cancelled, expected none`);
  if (tally.retried !== failing) problems.push(`${tally.retried} turns retried, expected ${failing}`);
  if (perTurn && tally.wrongAttempts !== 0)
    problems.push(`${tally.wrongAttempts} turns with the wrong number of attempts`);
  if (problems.length > 0) throw new BenchFailure(`${side}:\n  ${problems.join('\n  ')}`);
}

/**
 * No forced GC before a timed run (unlike the synchronous micro-benchmarks): a full `gc()` makes
 * V8 flush the code of what did not run since the previous one, so each run of one side would
 * re-measure its warm-up after a run of the other (found in the queue benchmark).
 */
async function timeAsync(fn: () => Promise<void>): Promise<Timing> {
  const cpu = process.cpuUsage();
  const start = performance.now();
  await fn();
  const wallMs = performance.now() - start;
  const used = process.cpuUsage(cpu);
  return { wallMs, cpuMs: (used.user + used.system) / 1000 };
}

async function measure(
  side: string,
  run: () => Promise<{ sink: CountingSink; tally: TurnTally }>,
  perTurn = true,
): Promise<Timing> {
  let result: { sink: CountingSink; tally: TurnTally } | undefined;
  const timing = await timeAsync(async () => {
    result = await run();
  });
  if (result === undefined) throw new BenchFailure(`${side}: no result`);
  check(side, result, perTurn);
  return timing;
}

// ---------------------------------------------------------------- memory of idle restored actors

interface MemoryResult {
  bytesPerActor: number;
  /** The heap the parsed persisted snapshots alone take (part of bytesPerActor: they become the actors' state). */
  parsedBytesPerActor: number;
  persistedBytesPerActor: number;
}

async function measureIdleActors(machine: SessionMachine): Promise<MemoryResult> {
  // The attempts run concurrently, so the sink counts per session rather than in one log.
  const perSession = new Map<string, number>();
  let misplacedTerminals = 0;
  let messages = 0;
  machineSink = new CountingSink();
  machineSink.sink = (message, meta) => {
    messages += 1;
    const count = (perSession.get(meta.sessionId) ?? 0) + 1;
    perSession.set(meta.sessionId, count);
    if (isTerminal(message) !== (count === MESSAGES_PER_ATTEMPT)) misplacedTerminals += 1;
  };
  const live = Array.from({ length: IDLE_ACTORS }, (_, i) =>
    startSessionActor(machine, { input: { sessionId: `idle-${i}`, policy: POLICY } }),
  );
  await Promise.all(
    live.map((actor, i) => {
      const id = `idle-${i}-p1`;
      actor.send({ type: 'session.prompt', prompt: { id, text: PROMPT_TEXT } });
      return waitFor(actor, (s) => s.context.turn?.promptId === id && ENDED.has(s.context.turn.status));
    }),
  );
  const wrongCounts = [...perSession.values()].filter((count) => count !== MESSAGES_PER_ATTEMPT).length;
  if (
    perSession.size !== IDLE_ACTORS ||
    wrongCounts !== 0 ||
    misplacedTerminals !== 0 ||
    messages !== IDLE_ACTORS * MESSAGES_PER_ATTEMPT
  ) {
    throw new BenchFailure(
      `idle actors: ${perSession.size} sessions, ${messages} messages, ${wrongCounts} sessions without exactly ${MESSAGES_PER_ATTEMPT}, ${misplacedTerminals} terminals not last; ` +
        `expected ${IDLE_ACTORS} sessions, ${IDLE_ACTORS * MESSAGES_PER_ATTEMPT} messages`,
    );
  }
  const texts = live.map((actor) => JSON.stringify(persistSession(actor)));
  for (const actor of live) actor.stop();
  live.length = 0;

  collectGarbage();
  collectGarbage();
  const beforeParse = process.memoryUsage().heapUsed;
  let parsed: unknown[] = texts.map((text) => JSON.parse(text) as unknown);
  collectGarbage();
  collectGarbage();
  const parsedBytes = process.memoryUsage().heapUsed - beforeParse;
  if (parsed.length !== IDLE_ACTORS) throw new BenchFailure('idle actors: parse');
  parsed = [];

  collectGarbage();
  collectGarbage();
  const before = process.memoryUsage().heapUsed;
  const restored = texts.map((text) => startSessionActor(machine, { persisted: JSON.parse(text) as PersistedSession }));
  collectGarbage();
  collectGarbage();
  const after = process.memoryUsage().heapUsed;

  const wrong = restored.filter((actor) => {
    const snapshot = actor.getSnapshot();
    return (
      snapshot.status !== 'active' || snapshot.value !== 'completed' || snapshot.context.turn?.status !== 'completed'
    );
  });
  if (wrong.length > 0)
    throw new BenchFailure(
      `idle actors: ${wrong.length} restored actors are not idle in 'completed': ${JSON.stringify(wrong[0]?.getSnapshot().value)}`,
    );
  for (const actor of restored) actor.stop();
  return {
    bytesPerActor: (after - before) / IDLE_ACTORS,
    parsedBytesPerActor: parsedBytes / IDLE_ACTORS,
    persistedBytesPerActor: texts.reduce((n, t) => n + t.length, 0) / IDLE_ACTORS,
  };
}

// ---------------------------------------------------------------- the benchmark

export async function run(log: (line: string) => void = console.log): Promise<Record<string, unknown>> {
  const failing = Math.floor(TURNS / FAIL_EVERY);
  const messages = (TURNS + failing) * MESSAGES_PER_ATTEMPT;
  const n = (x: number): string => Math.round(x).toLocaleString('en-US');
  log(
    `Session machine (one XState actor) vs. a hand-written loop: ${n(TURNS)} turns of ${MESSAGES_PER_ATTEMPT} messages from an in-process fake provider; ` +
      `every ${FAIL_EVERY}th turn's first attempt fails (server_error) and is retried after 0 ms: ${n(TURNS + failing)} attempts, ${n(messages)} messages`,
  );
  log(
    `  prompts sent one at a time, each turn awaited (xstate waitFor) before the next prompt, as a chat user waits for the answer`,
  );

  // Warm-up (also the first full check of both sides).
  await measure('baseline', runBaseline);
  await measure('machine', () => runMachine(benchMachine));
  log(
    `  check ok on every run: sink saw ${MESSAGES_PER_ATTEMPT} messages per attempt, ${n(TURNS)} turns completed, ${n(failing)} retried once`,
  );

  const machine: Timing[] = [];
  const baseline: Timing[] = [];
  for (let rep = 0; rep < REPETITIONS; rep += 1) {
    // Alternate which side goes first.
    if (rep % 2 === 0) {
      baseline.push(await measure('baseline', runBaseline));
      machine.push(await measure('machine', () => runMachine(benchMachine)));
    } else {
      machine.push(await measure('machine', () => runMachine(benchMachine)));
      baseline.push(await measure('baseline', runBaseline));
    }
  }
  const mailbox: Timing[] = [];
  for (let rep = 0; rep < 2; rep += 1)
    mailbox.push(await measure('machine (mailbox)', () => runMachineMailbox(benchMachine), false));

  const best = (t: Timing[]): number => Math.min(...t.map((x) => x.wallMs));
  const mid = (t: Timing[]): number => median(t.map((x) => x.wallMs));
  const bestCpu = (t: Timing[]): number => Math.min(...t.map((x) => x.cpuMs));
  const idleOfBest = (t: Timing[]): number => {
    const fastest = t.reduce((a, b) => (b.wallMs < a.wallMs ? b : a));
    return fastest.wallMs - fastest.cpuMs;
  };
  const turnsPerSec = TURNS / (best(machine) / 1000);
  const baselineTurnsPerSec = TURNS / (best(baseline) / 1000);
  const ratio = turnsPerSec / baselineTurnsPerSec;
  const row = (label: string, t: Timing[]): string =>
    `    ${label.padEnd(44)} ${n(TURNS / (best(t) / 1000)).padStart(7)} turns/s ${n(messages / (best(t) / 1000)).padStart(10)} msg/s ` +
    `${(((best(t) / messages) * 1e6) | 0).toString().padStart(5)} ns/msg  (median ${n(TURNS / (mid(t) / 1000))} turns/s, ${n(messages / (mid(t) / 1000))} msg/s)  cpu ${n(bestCpu(t))} ms`;
  log(
    `  best of ${REPETITIONS} runs each after a warm-up, alternating order, wall clock (median in brackets, best process CPU time last):`,
  );
  log(row('baseline: hand-written loop', baseline));
  log(row('machine: one session actor, awaited turns', machine));
  log(row('machine: all prompts at once (mailbox; 2 runs)', mailbox));
  log(
    `  overhead of the machine: ${(((best(machine) - best(baseline)) / TURNS) * 1000).toFixed(1)} µs per turn (wall, best), ${(((bestCpu(machine) - bestCpu(baseline)) / TURNS) * 1000).toFixed(1)} µs per turn (CPU, best)`,
  );
  log(
    `  cross-check on CPU time, ratio: ${(bestCpu(baseline) / bestCpu(machine)).toFixed(3)}; median wall ratio: ${(mid(baseline) / mid(machine)).toFixed(3)}`,
  );
  log(
    `  note: both sides wait out ${n(failing)} retry timers of 0 ms, which Node fires after ≥ 1 ms: the baseline's wall − CPU in its best run is ${n(idleOfBest(baseline))} ms, ` +
      `mostly those waits; the CPU ratio leaves them out (but counts GC threads)`,
  );

  // Memory: one warm-up round (compiles the restore path), then the measured ones.
  await measureIdleActors(benchMachine);
  const memory: MemoryResult[] = [];
  for (let rep = 0; rep < MEMORY_REPETITIONS; rep += 1) memory.push(await measureIdleActors(benchMachine));
  const bytesPerIdleActor = median(memory.map((m) => m.bytesPerActor));
  log(
    `  ${n(IDLE_ACTORS)} idle actors restored from persisted snapshots (one finished turn each, JSON round-tripped), heapUsed after full GC: ` +
      `${n(bytesPerIdleActor)} bytes each (median of ${MEMORY_REPETITIONS}: ${memory.map((m) => n(m.bytesPerActor)).join(', ')})`,
  );
  log(
    `    of which the parsed snapshot (context, turn record) ≈ ${n(median(memory.map((m) => m.parsedBytesPerActor)))} bytes; the rest is the actor and its XState system. ` +
      `Persisted JSON: ${n(memory[0]?.persistedBytesPerActor ?? 0)} bytes each`,
  );
  log(`  ratio ${ratio.toFixed(3)} (target ≥ ${TARGET_RATIO}): ${ratio >= TARGET_RATIO ? 'ok' : 'BELOW TARGET'}`);

  return {
    bench: name,
    turnsPerSec: round(turnsPerSec, 0),
    baselineTurnsPerSec: round(baselineTurnsPerSec, 0),
    ratio: round(ratio, 3),
    bytesPerIdleActor: round(bytesPerIdleActor, 0),
  };
}

/** The measured paths alone, for profiling one of them (`node --cpu-prof --import tsx -e …`). */
export const paths = {
  machine: () => runMachine(benchMachine),
  machineMailbox: () => runMachineMailbox(benchMachine),
  baseline: runBaseline,
};
