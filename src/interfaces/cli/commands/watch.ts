import type { Command } from 'commander';
import { sessionCommandError } from '../cli-error.ts';
import { ExitCode } from '../exit-codes.ts';
import { parseIntegerOption } from '../parse-options.ts';
import { openReader } from '../open-client.ts';
import { followSession } from '../follow.ts';

export function registerWatch(program: Command): void {
  program
    .command('watch')
    .description(
      "Print a session's messages live; exits once its latest turn has ended and everything is printed (exit 3 for an unknown id)",
    )
    .argument('<sessionId>')
    .option(
      '--from <seq>',
      'start at this message sequence number',
      parseIntegerOption('--from', 1, Number.MAX_SAFE_INTEGER),
      1,
    )
    .option('--json', 'one line per stored message: {"seq","turn","attempt","type","content"}')
    .option('--follow', 'keep waiting for later turns (until Ctrl+C)')
    .action(async (sessionId: string, flags: { from: number; json?: boolean; follow?: boolean }) => {
      const ctx = await openReader();
      try {
        const session = ctx.reader.session(sessionId);
        // An unknown session exits 3, a malformed id 2.
        await session.inspect().catch((error: unknown) => Promise.reject(sessionCommandError(error)));
        const controller = new AbortController();
        const onSignal = (): void => controller.abort();
        process.once('SIGINT', onSignal);
        await followSession(session, {
          fromSeq: flags.from,
          json: flags.json === true,
          until: flags.follow === true ? 'never' : 'latest',
          signal: controller.signal,
          workers: () => ctx.reader.deployment.workers(),
        });
        process.off('SIGINT', onSignal);
        process.exitCode = controller.signal.aborted ? ExitCode.interrupted : ExitCode.ok;
      } finally {
        await ctx.close();
      }
    });
}
