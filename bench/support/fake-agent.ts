import { z } from 'zod';
import { registerAgent } from '../../src/agents/registry.ts';
import { defineAgent, type CliMessage } from '../../src/index.ts';

/**
 * An in-process fake agent for the queue benchmarks, defined as a user defines an agent of their
 * own (`defineAgent`, the package's public API) and registered as `createWorker({ agents })`
 * registers one (these benchmarks drive SessionWorker directly). A session runs it when its
 * prompt names it (`fakeTurnOptions()`), and the worker's host options for it (`fakeHostOptions`)
 * say how many messages an attempt yields.
 */
export interface FakeAgentSpec {
  /** Messages per attempt, session.started and terminal.completed included (≥ 2). */
  messages: number;
}

export const FAKE_AGENT = defineAgent({
  name: 'bench-fake',
  options: z.object({}),
  run: ({ prompt, options, signal }) => fakeRun(specOf(options), prompt, signal),
});

/** The worker's `agentOptions` that give the fake its spec. */
export function fakeHostOptions(spec: FakeAgentSpec): Record<string, Record<string, unknown>> {
  return { [FAKE_AGENT.name]: { ...spec } };
}

/** A prompt's options that choose the fake. */
export function fakeTurnOptions(): { agent: string } {
  return { agent: FAKE_AGENT.name };
}

/** Registers the fake (again is a no-op): before the first enqueue that names it, in the process that runs the worker. */
export function install(): void {
  registerAgent(FAKE_AGENT.name, FAKE_AGENT.definition);
}

function specOf(options: Record<string, unknown>): FakeAgentSpec {
  const messages = options.messages;
  if (typeof messages !== 'number')
    throw new Error(`${FAKE_AGENT.name}: the worker's agentOptions carry no spec (fakeHostOptions)`);
  return { messages };
}

const DELTAS = [
  'Looking at the session store, ',
  'the writer batches every ',
  'message of a transition ',
  'into one fenced Lua call; ',
  'the lease is checked first. ',
];

/** Everything at once: session.started, messages − 2 assistant deltas, terminal.completed. */
async function* fakeRun(
  spec: FakeAgentSpec,
  prompt: string,
  signal: AbortSignal | undefined,
): AsyncGenerator<CliMessage, void, undefined> {
  signal?.throwIfAborted();
  const deltas = Math.max(0, spec.messages - 2);
  yield { type: 'session.started', content: { sessionId: `fake-${prompt.length}-${deltas}` } };
  for (let i = 0; i < deltas; i += 1) {
    if (signal?.aborted === true) throw signal.reason;
    yield { type: 'assistant', content: { text: DELTAS[i % DELTAS.length] ?? '' } };
  }
  yield {
    type: 'terminal.completed',
    content: { stopReason: 'stop', usage: { input: 1200, output: 20 * deltas, totalTokens: 1200 + 20 * deltas } },
  };
}
