import type { SpawnSpec } from '../../process/index.ts';
import type { CliMessage } from '../../protocol/index.ts';
import { obj, str } from '../shared/event-fields.ts';
import { parseEventLine } from '../shared/invalid-lines.ts';
import {
  followAgent,
  spawnForAttempt,
  startupFailure,
  type FinishingMapper,
  type FollowHooks,
  type RunContext,
} from '../shared/run-attempt.ts';
import type { Steer } from '../shared/steering.ts';

/** The ids of sessiond's own commands: pi echoes a command's id in its `response` line. */
const STATE_ID = 'sessiond-state';
const PROMPT_ID = 'sessiond-prompt';
const SETTLE_ID = 'sessiond-settle-';
const STEER_ID = 'sessiond-steer-';

function commandLine(command: Record<string, unknown>): string {
  return `${JSON.stringify(command)}\n`;
}

/** What the attempt's loop does after one of pi's lines. */
export interface RpcStep {
  /** Commands to write to pi's stdin, in order. */
  write: string[];
  /** The promptIds of the steers pi just took into the turn (it echoed them as user messages). */
  delivered: string[];
  /** The turn is over (pi answered sessiond's last question with nothing running, or refused the prompt). */
  settled: boolean;
}

interface WrittenSteer {
  readonly promptId: string;
  readonly text: string;
  readonly commandId: string;
}

/**
 * One turn of pi in `--mode rpc` (pi 0.73, docs/rpc.md), as pure logic: which commands to write, when
 * the turn is over, and which steers pi took.
 *
 * - Start: `get_state` (its answer carries the session id json mode prints as its header line, for
 *   the mapper), then the `prompt`.
 * - The turn is over when, after pi's `agent_end`, the answer to a `get_state` written after it shows
 *   nothing running. pi prints `agent_end` and, when it retries on its own, `auto_retry_start` in the
 *   same synchronous run, and reads its stdin only after it: so the answer comes after any such
 *   retry's first line (the mapper then no longer says the agent ended, and the next `agent_end`
 *   asks again). A refused `prompt` is over at once. pi does not exit by itself in rpc mode: the
 *   caller closes stdin then, and pi exits 0.
 * - A steer goes in as a `steer` command; pi delivers it after the running tool calls, before its
 *   next model request, as a user message (`message_start`/`message_end`, role user), together with
 *   every other steer queued by then, each its own message in order (its steering mode `all`, which
 *   the managed settings set: home.ts); so each echo is matched to its own steer below. The first
 *   user message of the turn is the prompt; a later one whose text is a written steer's is that
 *   steer's delivery, and so is one with another text when the oldest steer waiting starts with `/`
 *   (pi expands it as a prompt template or skill, and delivers its steers in order). A steer pi refused (its `response` has `success: false`) or never echoed
 *   is not reported: it stays pending with the runtime. Steers are written only once pi ended its
 *   first assistant message: pi writes a new session's file only then, and a steer it took before
 *   would be reported delivered though an attempt cut off there leaves no trace of it (held until then).
 */
export class PiRpcTurn {
  #settled = false;
  #probes = 0;
  #probeOpen = false;
  #promptEchoed = false;
  #steers = 0;
  readonly #written: WrittenSteer[] = [];
  /** pi ended its first assistant message: a new session's file exists, so what it takes is on disk. */
  #recorded = false;
  readonly #held: Steer[] = [];

  get settled(): boolean {
    return this.#settled;
  }

  start(prompt: string): string[] {
    return [
      commandLine({ id: STATE_ID, type: 'get_state' }),
      commandLine({ id: PROMPT_ID, type: 'prompt', message: prompt }),
    ];
  }

  /**
   * The commands to write now for `steer`: its `steer` command, or nothing once the turn is over, or
   * nothing yet before pi's first assistant `message_end` (then `observe` gives it with that line).
   */
  steer(steer: Steer): string[] {
    if (this.#settled) return [];
    if (!this.#recorded) {
      this.#held.push(steer);
      return [];
    }
    return [this.#steerCommand(steer)];
  }

  #steerCommand(steer: Steer): string {
    this.#steers += 1;
    const commandId = `${STEER_ID}${this.#steers}`;
    this.#written.push({ promptId: steer.promptId, text: steer.text, commandId });
    return commandLine({ id: commandId, type: 'steer', message: steer.text });
  }

  /** One of pi's stdout lines, after the mapper read it (`agentEnded`: the mapper's view after this line). */
  observe(line: string, agentEnded: boolean): RpcStep {
    const step: RpcStep = { write: [], delivered: [], settled: false };
    if (this.#settled) return step;
    // Only responses and the ends of messages and runs matter here; the mapper reads every line anyway.
    if (!line.includes('"response"') && !line.includes('_end"')) return step;
    const parsed = parseEventLine(line);
    if (parsed.ok !== true) return step;
    const event = parsed.event;
    if (event.type === 'response') this.#onResponse(event, agentEnded);
    else if (event.type === 'message_end' && obj(event.message)?.role === 'user') this.#onUserMessage(event, step);
    else if (event.type === 'message_end' && obj(event.message)?.role === 'assistant' && !this.#recorded) {
      this.#recorded = true;
      step.write.push(...this.#held.splice(0).map((steer) => this.#steerCommand(steer)));
    }
    if (agentEnded && !this.#probeOpen && ENDINGS.has(event.type)) {
      this.#probes += 1;
      this.#probeOpen = true;
      step.write.push(commandLine({ id: `${SETTLE_ID}${this.#probes}`, type: 'get_state' }));
    }
    step.settled = this.#settled;
    return step;
  }

  #onResponse(event: Record<string, unknown>, agentEnded: boolean): void {
    const id = str(event.id);
    if (id === PROMPT_ID && event.success === false) {
      this.#settled = true;
      return;
    }
    if (id.startsWith(STEER_ID) && event.success === false) {
      const at = this.#written.findIndex((s) => s.commandId === id);
      if (at >= 0) this.#written.splice(at, 1);
      return;
    }
    if (id !== `${SETTLE_ID}${this.#probes}`) return;
    this.#probeOpen = false;
    const state = obj(event.data);
    if (agentEnded && state?.isStreaming !== true && state?.isCompacting !== true) this.#settled = true;
  }

  #onUserMessage(event: Record<string, unknown>, step: RpcStep): void {
    if (!this.#promptEchoed) {
      this.#promptEchoed = true;
      return;
    }
    const text = userText(obj(event.message)?.content);
    let at = this.#written.findIndex((s) => s.text === text);
    // pi delivers its steers in order: a text no steer has is the oldest one's, if pi may have expanded it.
    if (at < 0 && this.#written[0]?.text.startsWith('/') === true) at = 0;
    if (at < 0) return;
    const [taken] = this.#written.splice(at, 1);
    if (taken !== undefined) step.delivered.push(taken.promptId);
  }
}

/** The events after which pi may be done with the turn (and a retry or compaction may follow). */
const ENDINGS = new Set(['agent_end', 'auto_retry_end', 'compaction_end']);

function userText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((block) => obj(block))
    .filter((block) => block?.type === 'text')
    .map((block) => str(block?.text))
    .join('');
}

/**
 * One attempt of pi in `--mode rpc`: the prompt goes in as a `prompt` command on stdin, which stays
 * open while the turn runs, so that each steer of `context.steering` goes in as a `steer` command;
 * once pi shows it took one (it echoes it as a user message), `context.steering.delivered` is told.
 * When the turn is over (see PiRpcTurn) stdin is closed: pi exits 0, and EXIT_GRACE_MS after its
 * last line it is stopped if it did not. Every line goes to the mapper, as in json mode.
 *
 * Contract: as runAgentAttempt (shared/run-attempt.ts): yields the attempt's messages and ends
 * with exactly one terminal message; a failure to start is a `startup` terminal; however the
 * attempt ends, no process of its tree is left. When the caller's signal aborts, the tree is
 * stopped (the three-stage stop: pi's SIGTERM handler kills its tools' processes first, as in json
 * mode) and the iterator rejects with the abort reason. A steer written and not echoed before the
 * attempt ends is not reported delivered.
 */
export async function* runPiRpc(
  spec: SpawnSpec,
  prompt: string,
  mapper: FinishingMapper,
  context: RunContext,
): AsyncGenerator<CliMessage, void, undefined> {
  const { signal, steering } = context;
  const spawned = await spawnForAttempt({ ...spec, stdinMode: 'pipe' }, context);
  if (!spawned.ok) {
    yield* startupFailure(mapper, spawned.error);
    return;
  }
  const agent = spawned.agent;
  const stdin = agent.stdin;
  const turn = new PiRpcTurn();
  let open = true;
  const write = (line: string): void => {
    if (open && stdin !== null && stdin.writable) stdin.write(line, () => undefined);
  };
  const closeStdin = (): void => {
    open = false;
    if (stdin !== null && stdin.writable) stdin.end();
  };
  for (const line of turn.start(prompt)) write(line);

  const steers = steering?.pending()[Symbol.asyncIterator]();
  // Each steer goes in as it comes; the channel failing leaves its steers pending with the runtime (nothing to deliver).
  void (async () => {
    if (steers === undefined) return;
    for (;;) {
      const next = await steers.next();
      if (next.done === true || !open) return;
      for (const command of turn.steer(next.value)) write(command);
    }
  })().catch(() => undefined);

  const hooks: FollowHooks = {
    line: (line) => {
      const step = turn.observe(line, mapper.agentEnded);
      for (const command of step.write) write(command);
      for (const promptId of step.delivered) steering?.delivered(promptId);
      if (step.settled) closeStdin();
      return turn.settled;
    },
    // No more commands; stdin stays open so that pi's SIGTERM handler (stage 1), not an EOF, ends it.
    aborted: () => {
      open = false;
    },
    ended: closeStdin,
  };
  try {
    yield* followAgent(agent, mapper, signal, hooks);
  } finally {
    // The channel may be waiting for the next steer: not awaited (the runtime ends it with the attempt),
    // and a failure to end it changes nothing here.
    void steers?.return?.(undefined).catch(() => undefined);
  }
}
