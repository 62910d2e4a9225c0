import type { CliMessage } from '../../protocol/index.ts';
import type { AgentDefinition, AgentRequest } from '../agent-definition.ts';
import type { RunContext } from './run-attempt.ts';

/**
 * One attempt's request as an agent's `run` sees it: `options` typed as the agent's own option
 * input (the host's options merged with the caller's), every field still optional. The agent's
 * provider validates them (its options schema); invalid ones end the attempt as a `startup` failure.
 */
export interface TypedAgentRequest<Input> extends Omit<AgentRequest, 'options'> {
  options: Readonly<Partial<Input>>;
}

/** An agent definition whose `run` takes its own option type. */
export interface TypedAgentDefinition<Input> extends Omit<AgentDefinition, 'run'> {
  run(request: TypedAgentRequest<Input>, context: RunContext): AsyncIterable<CliMessage>;
}

/**
 * Defines an agent behind the shared contract with typed options: the one place where the
 * opaque options of an `AgentRequest` become the agent's option input (instead of an
 * `as Partial<…>` cast in every agent). Internal; the public `defineAgent` wraps it.
 */
export function defineAgentDefinition<Input>(definition: TypedAgentDefinition<Input>): AgentDefinition {
  // The options are the agent's own input by construction (host options of this agent + caller
  // options checked by its callerOptions); its provider validates them again.
  const run: AgentDefinition['run'] = (request, context) =>
    definition.run(request as TypedAgentRequest<Input>, context);
  return { ...definition, run };
}
