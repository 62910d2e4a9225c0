import type { Command } from 'commander';
import { ERROR_CODES, hasErrorCode } from '../../../runtime/error-codes.ts';
import { CliError } from '../cli-error.ts';
import { ExitCode } from '../exit-codes.ts';
import { printJson } from '../present.ts';

export function registerDelete(program: Command): void {
  program
    .command('delete')
    .description('Delete a session fleet-wide: its keys, message log, agent state, activation job (exit 3 for an unknown id; deleting again is not an error)')
    .argument('<sessionId>')
    .option('--force', 'also a session that is active: its running turn is cancelled first (the process tree gone)')
    .option('--json', 'print {"sessionId","deleted","cancelled"}')
    .action(async (sessionId: string, flags: { force?: boolean; json?: boolean }) => {
      const { openRuntime } = await import('../context.ts');
      const ctx = await openRuntime();
      try {
        const result = await ctx.client.delete(sessionId, { force: flags.force === true });
        if (flags.json === true) printJson(result);
        else process.stdout.write(result.deleted ? `deleted ${sessionId}${result.cancelled ? ' (its running turn was cancelled first)' : ''}\n` : `${sessionId} was already deleted\n`);
      } catch (error) {
        if (hasErrorCode(error, ERROR_CODES.notFound)) throw new CliError(error.message, ExitCode.notFound);
        if (hasErrorCode(error, ERROR_CODES.conflict)) throw new CliError(error.message, ExitCode.failed);
        throw error;
      } finally {
        await ctx.close();
      }
    });
}
