import type { Command } from 'commander';
import { Option } from 'commander';
import { SESSION_STATES } from '../../../../machines/states.ts';
import { InputError } from '../../../runtime/runtime.ts';
import { CliError, openRuntime } from '../context.ts';
import { ExitCode } from '../exit-codes.ts';
import { colors, printJson } from '../present.ts';
import { parseIntegerOption } from '../parse-options.ts';

export function registerList(program: Command): void {
  program
    .command('list')
    .description('List sessions, newest first')
    .addOption(new Option('--state <state>', 'only sessions in this state').choices(SESSION_STATES))
    .option('--limit <n>', 'at most this many (one page)', parseIntegerOption('--limit', 1, 100_000), 100)
    .option('--cursor <next>', 'the page after an earlier one: its `next` cursor')
    .option('--json', 'one JSON array (with --paged: {"sessions": [...], "next": cursor | null})')
    .option('--paged', 'with --json, print the page and the cursor of the next one')
    .action(async (flags: { state?: string; limit: number; cursor?: string; json?: boolean; paged?: boolean }) => {
      const ctx = await openRuntime();
      try {
        const page = await ctx.runtime
          .listPage({ ...(flags.state === undefined ? {} : { state: flags.state }), ...(flags.cursor === undefined ? {} : { cursor: flags.cursor }), limit: flags.limit })
          .catch((error: unknown) => {
            if (error instanceof InputError) throw new CliError(`--cursor: ${error.issues[0]?.message ?? error.message}`, ExitCode.usage);
            throw error;
          });
        if (flags.json === true) return printJson(flags.paged === true ? page : page.sessions);
        const c = colors();
        if (page.sessions.length === 0) process.stdout.write('no sessions\n');
        for (const s of page.sessions) process.stdout.write(`${s.sessionId}  ${c.bold(s.state)}\n`);
        // The way on, where it does not mix with the ids on stdout.
        if (page.next !== null) process.stderr.write(`more: sessiond list${flags.state === undefined ? '' : ` --state ${flags.state}`} --limit ${flags.limit} --cursor ${page.next}\n`);
      } finally {
        await ctx.close();
      }
    });
}
