import { hostname, userInfo } from 'node:os';
import type { Command } from 'commander';
import { CliError } from '../cli-error.ts';
import { ExitCode } from '../exit-codes.ts';
import { printJson } from '../present.ts';
import { hasErrorCode } from '../../../errors.ts';
import { openClient } from '../open-client.ts';

/** Who deletes from this shell, for the deletion audit stream. */
function cliActor(): string {
  let user = 'unknown';
  try {
    user = userInfo().username;
  } catch {
    // no passwd entry (a container's uid)
  }
  return `cli:${user}@${hostname()}`;
}

export function registerDelete(program: Command): void {
  program
    .command('deletions')
    .description(
      "The deletion audit log, newest first: when, which session, who (a token's name, cli:user@host), force, outcome (deleted, already-deleted, refused)",
    )
    .option('--limit <n>', 'at most this many entries (1-10000)', '50')
    .option('--json', 'print a JSON array')
    .action(async (flags: { limit: string; json?: boolean }) => {
      const limit = Number(flags.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > 10_000)
        throw new CliError(`--limit: must be an integer from 1 to 10000 (got "${flags.limit}")`, ExitCode.usage);
      const ctx = await openClient();
      try {
        const entries = await ctx.client.sessions.deletions({ limit });
        if (flags.json === true) printJson(entries);
        else
          for (const e of entries)
            process.stdout.write(
              `${new Date(e.at).toISOString()}  ${e.sessionId}  ${e.outcome}${e.force ? ' (force)' : ''}${e.cancelled ? ' (turn cancelled)' : ''}  by ${e.actor}\n`,
            );
      } finally {
        await ctx.close();
      }
    });

  program
    .command('delete')
    .description(
      'Delete a session fleet-wide: its keys, message log, agent state, activation job (exit 3 for an unknown id; deleting again is not an error)',
    )
    .argument('<sessionId>')
    .option('--force', 'also a session that is active: its running turn is cancelled first (the process tree gone)')
    .option('--json', 'print {"sessionId","deleted","cancelled"}')
    .action(async (sessionId: string, flags: { force?: boolean; json?: boolean }) => {
      const ctx = await openClient();
      try {
        const result = await ctx.client.session(sessionId).delete({ force: flags.force === true, actor: cliActor() });
        if (flags.json === true) printJson(result);
        else
          process.stdout.write(
            result.deleted
              ? `deleted ${sessionId}${result.cancelled ? ' (its running turn was cancelled first)' : ''}\n`
              : `${sessionId} was already deleted\n`,
          );
      } catch (error) {
        if (hasErrorCode(error, 'not_found')) throw new CliError(error.message, ExitCode.notFound);
        if (hasErrorCode(error, 'conflict')) throw new CliError(error.message, ExitCode.failed);
        throw error;
      } finally {
        await ctx.close();
      }
    });
}
