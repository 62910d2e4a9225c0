import type { CliMessage } from '../../protocol/index.ts';
import type { SessionWriter } from '../session-writer.ts';
import type { SessionTracer } from '../tracing/session-tracer.ts';
import { usageTotals } from '../usage/usage.ts';

/**
 * An attempt's token usage, from its terminal.completed: counted by the same fenced write as that
 * message (queued first: never split from it), and put on the attempt's span.
 */
export function countUsage(
  message: Extract<CliMessage, { type: 'terminal.completed' }>,
  at: { turn: number; attempt: number },
  labels: { agent: string; model: string },
  writer: SessionWriter,
  tracer: SessionTracer | null,
): void {
  const usage = usageTotals(message.content.usage);
  if (usage === null) return;
  writer.usage({ turn: at.turn, attempt: at.attempt, ...labels, usage, at: Date.now() });
  tracer?.tokens(at.turn, at.attempt, usage);
}
