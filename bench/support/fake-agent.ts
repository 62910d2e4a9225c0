import { AGENTS, type AgentRun } from '../../src/agents/registry.ts';
import type { CliMessage } from '../../src/protocol/index.ts';

/**
 * An in-process fake agent for the queue benchmark, without editing src/.
 *
 * The worker picks the agent by name (`request.options.agent`, default `pi`)
 * through `agentDefinition(name)` from src/agents/registry.ts, and `enqueue`
 * only accepts names known when src/runtime/turn-options.ts was evaluated, so a
 * new registry key would not get through `enqueue`. Instead, `install()`
 * wraps `AGENTS.pi.run` (a plain, mutable property): a worker whose host
 * options for pi carry `benchFake` (see `fakeHostOptions`) runs the fake; any
 * other call goes to the real pi as before. `uninstall()` puts the original back.
 */
export interface FakeAgentSpec {
  /** Messages per attempt, session.started and terminal.completed included (≥ 2). */
  messages: number;
}

const KEY = 'benchFake';
let original: AgentRun | null = null;

/** The worker's `agentOptions.pi` that selects the fake. */
export function fakeHostOptions(spec: FakeAgentSpec): Record<string, unknown> {
  return { [KEY]: spec };
}

export function install(): void {
  if (original !== null) return;
  const real = AGENTS.pi.run;
  original = real;
  AGENTS.pi.run = (request, context) => {
    const spec = request.options[KEY];
    if (!isSpec(spec)) return real(request, context);
    return fakeRun(spec, request.text, context.signal);
  };
}

export function uninstall(): void {
  if (original === null) return;
  AGENTS.pi.run = original;
  original = null;
}

function isSpec(value: unknown): value is FakeAgentSpec {
  return value !== null && typeof value === 'object' && typeof (value as { messages?: unknown }).messages === 'number';
}

const DELTAS = ['Looking at the session store, ', 'the writer batches every ', 'message of a transition ', 'into one fenced Lua call; ', 'the lease is checked first. '];

/** Everything at once: session.started, messages − 2 assistant deltas, terminal.completed. */
async function* fakeRun(spec: FakeAgentSpec, prompt: string, signal: AbortSignal | undefined): AsyncGenerator<CliMessage, void, undefined> {
  signal?.throwIfAborted();
  const deltas = Math.max(0, spec.messages - 2);
  yield { type: 'session.started', content: { sessionId: `fake-${prompt.length}-${deltas}` } };
  for (let i = 0; i < deltas; i += 1) {
    if (signal?.aborted === true) throw signal.reason;
    yield { type: 'assistant', content: { text: DELTAS[i % DELTAS.length] ?? '' } };
  }
  yield { type: 'terminal.completed', content: { stopReason: 'stop', usage: { input: 1200, output: 20 * deltas, totalTokens: 1200 + 20 * deltas } } };
}
