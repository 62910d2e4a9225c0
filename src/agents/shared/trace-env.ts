import type { RunContext } from './run-attempt.ts';

/**
 * The W3C trace context of the attempt, for the agent's environment (`TRACEPARENT`, and
 * `TRACESTATE` when there is one): an agent that traces itself joins the attempt's trace. Added to
 * the sealed environment on purpose, per attempt — never inherited from the worker's own.
 */
export function traceEnv(context: Pick<RunContext, 'traceparent' | 'tracestate'>): Record<string, string> {
  const env: Record<string, string> = {};
  if (context.traceparent !== undefined && context.traceparent !== '') env.TRACEPARENT = context.traceparent;
  if (context.traceparent !== undefined && context.tracestate !== undefined && context.tracestate !== '')
    env.TRACESTATE = context.tracestate;
  return env;
}
