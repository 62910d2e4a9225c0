import { Command, CommanderError } from 'commander';
import { hasErrorCode } from '../../errors.ts';
import { CliError } from './cli-error.ts';
import { EXIT_CODES_HELP, ExitCode } from './exit-codes.ts';

/** The `sessiond` program without its commands: what the whole program (main.ts) and the fast commands (fast.ts) share. */
export function baseProgram(): Command {
  return new Command('sessiond')
    .description('Chat sessions with CLI coding agents as durable actors')
    .version('0.1.0')
    .addHelpText('after', EXIT_CODES_HELP)
    .exitOverride()
    .configureOutput({ writeErr: (text) => process.stderr.write(text) });
}

/** Every command (and sub-command) of `program` throws instead of exiting, as the program does. */
export function overrideExits(program: Command): Command {
  const override = (command: Command): void => {
    command.exitOverride();
    command.commands.forEach(override);
  };
  program.commands.forEach(override);
  return program;
}

/**
 * A reader that stops reading (`sessiond list | head -1`) closes standard output under the command:
 * its next write fails with EPIPE. That is taken as Ctrl+C, not a crash: a command that runs
 * something (`run`, `watch`, `enqueue --follow`, `worker`) stops it as it does on SIGINT (an agent's
 * whole process tree gone), any other ends at once, as on SIGINT (exit 130).
 */
function onStdoutError(error: NodeJS.ErrnoException): void {
  if (error.code !== 'EPIPE') throw error;
  process.stdout.off('error', onStdoutError);
  process.stdout.on('error', () => {}); // the writes still queued fail the same way
  process.kill(process.pid, 'SIGINT');
}

/** Runs `program` on argv; returns the process exit code. Never throws. */
export async function runProgram(program: Command, argv: readonly string[]): Promise<number> {
  if (!process.stdout.listeners('error').includes(onStdoutError)) process.stdout.on('error', onStdoutError);
  try {
    await program.parseAsync([...argv]);
    return typeof process.exitCode === 'number' ? process.exitCode : ExitCode.ok;
  } catch (error) {
    if (error instanceof CommanderError) {
      if (
        error.code === 'commander.helpDisplayed' ||
        error.code === 'commander.version' ||
        error.code === 'commander.help'
      )
        return ExitCode.ok;
      return ExitCode.usage;
    }
    if (error instanceof CliError) {
      process.stderr.write(`sessiond: ${error.message}\n`);
      return error.exitCode;
    }
    // An unknown session exits 3 from every command, whichever operation found it unknown.
    if (hasErrorCode(error, 'not_found')) {
      process.stderr.write(`sessiond: ${error.message}\n`);
      return ExitCode.notFound;
    }
    process.stderr.write(`sessiond: ${(error as Error).message}\n`);
    return ExitCode.failed;
  }
}
