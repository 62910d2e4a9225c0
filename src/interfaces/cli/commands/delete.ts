import type { Command } from 'commander';
import { CliError, openRuntime } from '../context.ts';
import { ExitCode } from '../exit-codes.ts';
import { printJson } from '../present.ts';
import { hasErrorCode } from '../../../errors.ts';

export function registerDelete(program: Command): void {
  program
    .command('delete')
    .description('Delete a session fleet-wide: its keys, message log, agent state, activation job (exit 3 for an unknown id; deleting again is not an error)')
    .argument('<sessionId>')
    .option('--force', 'also a session that is active: its running turn is cancelled first (the process tree gone)')
    .option('--json', 'print {"sessionId","deleted","cancelled"}')
    .action(async (sessionId: string, flags: { force?: boolean; json?: boolean }) => {
      const ctx = await openRuntime();
      try {
        const result = await ctx.runtime.deleteSession(sessionId, { force: flags.force === true });
        if (flags.json === true) printJson(result);
        else process.stdout.write(result.deleted ? `deleted ${sessionId}${result.cancelled ? ' (its running turn was cancelled first)' : ''}\n` : `${sessionId} was already deleted\n`);
      } catch (error) {
        if (hasErrorCode(error, 'not_found')) throw new CliError(error.message, ExitCode.notFound);
        if (hasErrorCode(error, 'conflict')) throw new CliError(error.message, ExitCode.failed);
        throw error;
      } finally {
        await ctx.close();
      }
    });
}
