import type { Command } from 'commander';
import { sessionCommandError } from '../cli-error.ts';
import { printJson } from '../present.ts';
import { openClient } from '../open-client.ts';

/** `sessiond resume ID`: a session parked at a quota wall starts its next attempt now (`resume-dispatch` is for paused dispatch). */
export function registerResume(program: Command): void {
  program
    .command('resume')
    .description(
      "Resume a session parked at a quota wall now, before the provider's reset (its next attempt starts); exit 1 when it is not parked. For paused dispatch see resume-dispatch",
    )
    .argument('<sessionId>')
    .option('--json', 'print {"sessionId","turn","parkedUntil","delivered"}')
    .action(async (sessionId: string, flags: { json?: boolean }) => {
      const ctx = await openClient();
      try {
        let result;
        try {
          result = await ctx.client.session(sessionId).resume();
        } catch (error) {
          throw sessionCommandError(error);
        }
        if (flags.json === true) printJson(result);
        else
          process.stdout.write(
            `${sessionId} resumed: turn ${result.turn} goes on now (its quota wall was to lift at ${new Date(result.parkedUntil).toISOString()})\n`,
          );
      } finally {
        await ctx.close();
      }
    });
}
