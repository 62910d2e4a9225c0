import type { Command } from 'commander';
import { sessionCommandError } from '../cli-error.ts';
import { ExitCode } from '../exit-codes.ts';
import { printJson } from '../present.ts';
import { openClient } from '../open-client.ts';
import { followSession } from '../follow.ts';

export function registerRetry(program: Command): void {
  program
    .command('retry')
    .description(
      "Retry the session's failed last turn as a new turn (a turn retry: same prompt, attempts from 1 under the retry policy in force); exit 1 when its last turn did not fail",
    )
    .argument('<sessionId>')
    .option('--json', 'print {"sessionId","turn","retryOf"}')
    .option('--follow', 'stream the new turn until it ends (exit 0 completed, 1 failed, 130 cancelled)')
    .action(async (sessionId: string, flags: { json?: boolean; follow?: boolean }) => {
      const ctx = await openClient();
      try {
        const session = ctx.client.session(sessionId);
        // A log not readable yet follows from its first message.
        const fromSeq = (await session.lastSeq().catch(() => 0)) + 1;
        let result;
        try {
          result = await session.retry();
        } catch (error) {
          throw sessionCommandError(error);
        }
        if (flags.json === true && flags.follow !== true) printJson(result);
        else if (flags.follow !== true)
          process.stdout.write(`turn ${result.retryOf} of ${sessionId} queued again as turn ${result.turn}\n`);
        if (flags.follow !== true) return;
        const controller = new AbortController();
        const summary = await followSession(session, {
          fromSeq,
          json: flags.json === true,
          until: result.turn,
          signal: controller.signal,
          workers: () => ctx.client.deployment.workers(),
        });
        const status = summary?.turn?.status;
        if (status === 'cancelled') process.exitCode = ExitCode.interrupted;
        else if (status === 'failed') process.exitCode = ExitCode.failed;
      } finally {
        await ctx.close();
      }
    });
}
