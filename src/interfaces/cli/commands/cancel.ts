import type { Command } from 'commander';
import { CliError } from '../cli-error.ts';
import { ExitCode } from '../exit-codes.ts';
import { printJson } from '../present.ts';
import { hasErrorCode } from '../../../errors.ts';

export function registerCancel(program: Command): void {
  program
    .command('cancel')
    .description("Cancel a session's current turn, wherever it runs (exit 3 for an unknown id)")
    .argument('<sessionId>')
    .option('--reason <text>', 'recorded with the cancelled turn', 'cancelled by operator')
    .option('--json', 'print {"sessionId","delivered"}')
    .action(async (sessionId: string, flags: { reason: string; json?: boolean }) => {
      const { openRuntime } = await import('../context.ts');
      const ctx = await openRuntime();
      try {
        const result = await ctx.client.cancel(sessionId, flags.reason);
        if (flags.json === true) printJson({ sessionId, ...result });
        else process.stdout.write(`cancel requested for ${sessionId} (${result.delivered === 'worker' ? 'sent to the worker that runs it' : 'applied at its next activation'})\n`);
      } catch (error) {
        if (hasErrorCode(error, 'not_found')) throw new CliError(error.message, ExitCode.notFound);
        throw error;
      } finally {
        await ctx.close();
      }
    });
}
