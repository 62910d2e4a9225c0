import type { CliMessage } from '../../protocol/index.ts';

/** How one attempt's process ended, as the mapper needs to know it. */
export interface AttemptExit {
  exitCode: number | null;
  signal: string | null;
  /** Why sessiond stopped the process, when it did. */
  stopReason: 'requested' | 'idle_timeout' | 'exit_grace' | null;
  stderrTail: string;
  /** Set when the process could not be started at all. */
  spawnError?: string;
}

/**
 * Contract: pure; one line of the agent's stdout in, zero or more messages out.
 * Never throws: a bad line becomes data, reported in the terminal message.
 * `complete()` is called once, after the last line, and returns exactly one
 * terminal message (last in its result); after it the mapper is spent.
 */
export interface AgentMapper {
  push(line: string): CliMessage[];
  complete(exit: AttemptExit): CliMessage[];
}
