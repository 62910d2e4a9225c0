import type { Command } from 'commander';
import { Option } from 'commander';
import type { SessionState } from '../../../api/types.ts';
import { CliError } from '../cli-error.ts';
import { ExitCode } from '../exit-codes.ts';
import { colors, printJson } from '../present.ts';
import { parseIntegerOption } from '../parse-options.ts';
import { LIST_STATES } from '../state-names.ts';
import { hasErrorCode } from '../../../errors.ts';
import { openReader } from '../open-client.ts';

export function registerList(program: Command): void {
  program
    .command('list')
    .description('List sessions, newest first, one page at a time')
    .addOption(
      new Option('--state <state>', 'only sessions in this state: queued or any state of the session machine').choices(
        LIST_STATES,
      ),
    )
    .option('--limit <n>', 'at most this many (one page)', parseIntegerOption('--limit', 1, 100_000), 100)
    .option('--cursor <next>', 'the page after an earlier one: its `next` cursor')
    .option('--json', 'one JSON array (with --paged: {"sessions": [...], "next": cursor | null})')
    .option('--paged', 'with --json, print the page and the cursor of the next one')
    .action(async (flags: { state?: string; limit: number; cursor?: string; json?: boolean; paged?: boolean }) => {
      const ctx = await openReader();
      try {
        const page = await ctx.reader.sessions
          .list({
            ...(flags.state === undefined ? {} : { state: flags.state as SessionState }),
            ...(flags.cursor === undefined ? {} : { cursor: flags.cursor }),
            limit: flags.limit,
          })
          .catch((error: unknown) => {
            if (hasErrorCode(error, 'invalid_input'))
              throw new CliError(`--cursor: ${error.issues[0]?.message ?? error.message}`, ExitCode.usage);
            throw error;
          });
        if (flags.json === true) return printJson(flags.paged === true ? page : page.sessions);
        const c = colors();
        if (page.sessions.length === 0) process.stdout.write('no sessions\n');
        for (const s of page.sessions) process.stdout.write(`${s.sessionId}  ${c.bold(s.state)}\n`);
        // The way on, where it does not mix with the ids on stdout.
        if (page.next !== null)
          process.stderr.write(
            `more: sessiond list${flags.state === undefined ? '' : ` --state ${flags.state}`} --limit ${flags.limit} --cursor ${page.next}\n`,
          );
      } finally {
        await ctx.close();
      }
    });
}
