import type { Command } from 'commander';
import { Option } from 'commander';
import { openRuntime } from '../context.ts';
import { colors, printJson } from '../present.ts';
import { parseIntegerOption } from '../parse-options.ts';

export const SESSION_STATES = ['queued', 'idle', 'waiting', 'running', 'backoff', 'cancelling', 'completed', 'failed', 'cancelled'] as const;

export function registerList(program: Command): void {
  program
    .command('list')
    .description('List sessions, newest first')
    .addOption(new Option('--state <state>', 'only sessions in this state').choices(SESSION_STATES))
    .option('--limit <n>', 'at most this many', parseIntegerOption('--limit', 1, 100_000), 100)
    .option('--json', 'one JSON array')
    .action(async (flags: { state?: string; limit: number; json?: boolean }) => {
      const ctx = await openRuntime();
      try {
        const sessions = await ctx.runtime.listSessions({ ...(flags.state === undefined ? {} : { state: flags.state }), limit: flags.limit });
        if (flags.json === true) return printJson(sessions);
        const c = colors();
        if (sessions.length === 0) process.stdout.write('no sessions\n');
        for (const s of sessions) process.stdout.write(`${s.sessionId}  ${c.bold(s.state)}\n`);
      } finally {
        await ctx.close();
      }
    });
}
