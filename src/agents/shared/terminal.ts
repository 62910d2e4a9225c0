import type { FailureCategory, MessageOf } from '../../protocol/index.ts';
import type { AttemptExit } from './agent-mapper.ts';
import type { InvalidLines } from './invalid-lines.ts';

export interface FailureFacts {
  text: string;
  category: FailureCategory;
  retryAfterMs?: number;
  /** The agent's own error text, verbatim. */
  agentError?: string;
}

export function failedMessage(
  facts: FailureFacts,
  exit: AttemptExit,
  invalid: InvalidLines,
): MessageOf<'terminal.failed'> {
  const invalidLines = invalid.list();
  const parts = [facts.text];
  if (invalidLines.length > 0) parts.push(`${invalid.count} invalid output line(s), first: ${invalidLines[0]}`);
  const stderr = exit.stderrTail.trim();
  if (stderr !== '' && !facts.text.includes(stderr)) parts.push(`stderr: ${lastLines(stderr, 5)}`);
  return {
    type: 'terminal.failed',
    content: {
      text: parts.join('\n'),
      category: facts.category,
      ...(facts.retryAfterMs === undefined ? {} : { retryAfterMs: facts.retryAfterMs }),
      ...(exit.exitCode === null ? {} : { exitCode: exit.exitCode }),
      ...(exit.signal === null ? {} : { signal: exit.signal }),
      ...(facts.agentError === undefined ? {} : { agentError: facts.agentError }),
      stderr: exit.stderrTail,
      invalid_output_lines: invalidLines,
    },
  };
}

/**
 * The failure that the process's way of ending implies on its own, before any
 * agent event is considered: cannot start, idle, killed, crashed. `null` when
 * the process exited 0 by itself.
 */
export function exitFailure(exit: AttemptExit): FailureFacts | null {
  if (exit.spawnError !== undefined) return { text: `cannot start the agent: ${exit.spawnError}`, category: 'startup' };
  if (exit.stopReason === 'idle_timeout')
    return { text: 'the agent printed nothing for too long (idle timeout) and was stopped', category: 'timeout' };
  if (exit.stopReason === 'requested') return { text: 'the agent was stopped on request', category: 'process_crash' };
  if (exit.signal !== null) return { text: `the agent was killed by ${exit.signal}`, category: 'process_crash' };
  if (exit.exitCode !== null && exit.exitCode !== 0)
    return { text: `the agent exited with code ${exit.exitCode}`, category: 'process_crash' };
  return null;
}

function lastLines(text: string, count: number): string {
  return text.split('\n').slice(-count).join('\n');
}
