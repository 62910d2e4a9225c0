import type { Command } from 'commander';
import { CliError } from '../cli-error.ts';
import { ExitCode } from '../exit-codes.ts';
import { printJson } from '../present.ts';
import { hasErrorCode } from '../../../errors.ts';
import { openClient } from '../open-client.ts';

interface CancelFlags {
  reason: string;
  json?: boolean;
  state?: string;
  agent?: string;
  dryRun?: boolean;
}

export function registerCancel(program: Command): void {
  program
    .command('cancel')
    .description(
      "Cancel a session's current turn, wherever it runs (exit 3 for an unknown id); or, with --state (and --agent), every session in that state (--dry-run lists them)",
    )
    .argument('[sessionId]')
    .option('--reason <text>', 'recorded with the cancelled turn', 'cancelled by operator')
    .option('--state <state>', 'bulk: every session in this state (queued, running, backoff, parked)')
    .option('--agent <name>', 'bulk: only sessions of this agent')
    .option('--dry-run', 'bulk: list what would be cancelled, cancel nothing')
    .option('--json', 'print {"sessionId","delivered"} (bulk: {"dryRun","matched","cancelled"})')
    .action(async (sessionId: string | undefined, flags: CancelFlags) => {
      const bulk = flags.state !== undefined || flags.agent !== undefined || flags.dryRun === true;
      if (bulk === (sessionId !== undefined))
        throw new CliError('give either a session id or --state [--agent] [--dry-run]', ExitCode.usage);
      const ctx = await openClient();
      try {
        if (sessionId === undefined) {
          const result = await ctx.client.sessions.cancelMatching({
            state: flags.state,
            ...(flags.agent === undefined ? {} : { agent: flags.agent }),
            dryRun: flags.dryRun === true,
            reason: flags.reason,
          });
          if (flags.json === true) printJson(result);
          else {
            for (const s of result.matched) process.stdout.write(`${s.sessionId}  ${s.state}  ${s.agent}\n`);
            process.stdout.write(
              result.dryRun
                ? `${result.matched.length} session(s) would be cancelled (dry run)\n`
                : `${result.cancelled} session(s) cancelled\n`,
            );
          }
          return;
        }
        const result = await ctx.client.session(sessionId).cancel(flags.reason);
        if (flags.json === true) printJson({ sessionId, ...result });
        else
          process.stdout.write(
            `cancel requested for ${sessionId} (${result.delivered === 'worker' ? 'sent to the worker that runs it' : 'applied at its next activation'})\n`,
          );
      } catch (error) {
        if (hasErrorCode(error, 'not_found')) throw new CliError(error.message, ExitCode.notFound);
        if (hasErrorCode(error, 'invalid_input')) throw new CliError(error.message, ExitCode.usage);
        throw error;
      } finally {
        await ctx.close();
      }
    });
}
