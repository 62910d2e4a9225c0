import { hasErrorCode } from '../../errors.ts';
import { ExitCode } from './exit-codes.ts';

/** An error the CLI reports as one line on stderr, with its exit code. */
export class CliError extends Error {
  override readonly name = 'CliError';
  readonly exitCode: number;
  constructor(message: string, exitCode = 2) {
    super(message);
    this.exitCode = exitCode;
  }
}

/**
 * What a session command's client call threw, as the CLI reports it: an unknown session or request
 * exits 3, bad input 2, a conflict (being deleted, already decided, not parked…) 1; anything else as it was.
 */
export function sessionCommandError(error: unknown): unknown {
  if (hasErrorCode(error, 'not_found')) return new CliError(error.message, ExitCode.notFound);
  if (hasErrorCode(error, 'invalid_input')) return new CliError(error.message, ExitCode.usage);
  if (hasErrorCode(error, 'conflict')) return new CliError(error.message, ExitCode.failed);
  return error;
}
