import type { Command } from 'commander';
import { sessionCommandError } from '../cli-error.ts';
import { ExitCode } from '../exit-codes.ts';
import { printJson } from '../present.ts';
import { openClient } from '../context.ts';
import { followSession } from '../follow.ts';

export function registerRetry(program: Command): void {
  program
    .command('retry')
    .description("Re-run the session's failed last turn as a new turn (same prompt, a new series of attempts under the current policy); exit 1 when its last turn did not fail")
    .argument('<sessionId>')
    .option('--json', 'print {"sessionId","turn","retryOf"}')
    .option('--follow', 'stream the new turn until it ends (exit 0 completed, 1 failed, 130 cancelled)')
    .action(async (sessionId: string, flags: { json?: boolean; follow?: boolean }) => {
      const ctx = await openClient();
      try {
        const fromSeq = (await ctx.runtime.lastSeq(sessionId).catch(() => 0)) + 1;
        let result;
        try {
          result = await ctx.runtime.retry(sessionId);
        } catch (error) {
          throw sessionCommandError(error);
        }
        if (flags.json === true && flags.follow !== true) printJson(result);
        else if (flags.follow !== true) process.stdout.write(`turn ${result.retryOf} of ${sessionId} queued again as turn ${result.turn}\n`);
        if (flags.follow !== true) return;
        const controller = new AbortController();
        const summary = await followSession(ctx.runtime, sessionId, { fromSeq, json: flags.json === true, until: result.turn, signal: controller.signal });
        const status = summary?.turn?.status;
        if (status === 'cancelled') process.exitCode = ExitCode.interrupted;
        else if (status === 'failed') process.exitCode = ExitCode.failed;
      } finally {
        await ctx.close();
      }
    });
}
