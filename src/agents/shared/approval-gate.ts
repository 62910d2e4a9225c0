import type { ApprovalOption, CliMessage } from '../../protocol/index.ts';

/** A permission request of an agent, as sessiond asks an operator about it. */
export interface ApprovalAsk {
  toolCallId: string;
  tool: string;
  kind?: string;
  arguments: unknown;
  options: ApprovalOption[];
}

/** The answer for the agent: one of its options, or none (its request answered `cancelled`). */
export interface ApprovalAnswer {
  optionId: string | null;
  outcome: 'allowed' | 'denied';
}

/**
 * Where an attempt in `ask` mode takes an agent's permission request (the durable runtime gives
 * one per attempt, see src/runtime/approvals/). Contract: `ask` emits `approval.requested`, then
 * — once an operator, a policy rule or the deadline decided — `approval.decided`, through `emit`,
 * and resolves with the answer for the agent; it resolves `null` when `signal` aborts (the attempt
 * is being stopped: the request stays pending, for the next activation to ask again). Never rejects.
 */
export interface ApprovalGate {
  ask(request: ApprovalAsk, emit: (message: CliMessage) => void, signal: AbortSignal): Promise<ApprovalAnswer | null>;
}

/** The option of `kinds` (first match wins) among those offered. */
export function optionOfKind(options: readonly ApprovalOption[], kinds: readonly string[]): ApprovalOption | undefined {
  for (const kind of kinds) {
    const option = options.find((o) => o.kind === kind);
    if (option !== undefined) return option;
  }
  return undefined;
}

/** A denial as the agent gets it: its `reject_once` option, else `reject_always`, else `cancelled`. */
export function denial(options: readonly ApprovalOption[]): ApprovalAnswer {
  return { optionId: optionOfKind(options, ['reject_once', 'reject_always'])?.optionId ?? null, outcome: 'denied' };
}
