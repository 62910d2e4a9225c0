import type { Command } from 'commander';
import { sessionCommandError } from '../cli-error.ts';
import { openClient } from '../open-client.ts';
import { parseIntegerOption } from '../parse-options.ts';
import { printJson } from '../present.ts';

/** `undo`, `fork`, `diff`: a workspace session's turns (docs/workspaces.md "Undo, fork and diff"). */
export function registerTurns(program: Command): void {
  program
    .command('undo')
    .description(
      "Take back a workspace session's last completed turn: its files and the agent's conversation are the previous turn's again (exit 1 while a turn runs, for a session without a workspace, or its first turn)",
    )
    .argument('<sessionId>')
    .option('--force', 'cancel a running turn first, wait for it to end, then undo the last completed turn')
    .option('--json', 'print {"sessionId","undone","to","snapshot","cancelled"}')
    .action(async (sessionId: string, flags: { force?: boolean; json?: boolean }) => {
      const ctx = await openClient();
      try {
        const result = await ctx.client
          .session(sessionId)
          .undo({ force: flags.force === true })
          .catch((error: unknown) => Promise.reject(sessionCommandError(error)));
        if (flags.json === true) printJson(result);
        else
          process.stdout.write(
            `turn ${result.undone} of ${sessionId} undone: its files and conversation are turn ${result.to}'s${result.cancelled ? ' (its running turn was cancelled first)' : ''}\n`,
          );
      } finally {
        await ctx.close();
      }
    });

  program
    .command('fork')
    .description(
      "A new session with a workspace session's files and conversation after one of its turns; the session forked is not changed (needs workspaces configured on this host)",
    )
    .argument('<sessionId>')
    .requiredOption('--as <newId>', 'the new session id')
    .option('--turn <n>', 'after this turn (default: the last completed one)', parseIntegerOption('--turn', 1, 1e9))
    .option('--json', 'print {"sessionId","turn","snapshot","messages","state","conversation"}')
    .action(async (sessionId: string, flags: { as: string; turn?: number; json?: boolean }) => {
      const ctx = await openClient();
      try {
        const result = await ctx.client
          .session(sessionId)
          .fork({ as: flags.as, ...(flags.turn === undefined ? {} : { turn: flags.turn }) })
          .catch((error: unknown) => Promise.reject(sessionCommandError(error)));
        if (flags.json === true) printJson(result);
        else process.stdout.write(`${result.sessionId}: a fork of ${sessionId} after turn ${result.turn}\n`);
      } finally {
        await ctx.close();
      }
    });

  program
    .command('diff')
    .description(
      "What one turn of a workspace session changed in its files: a unified diff from the previous turn's (needs workspaces configured on this host)",
    )
    .argument('<sessionId>')
    .option('--turn <n>', 'this turn (default: the last completed one)', parseIntegerOption('--turn', 1, 1e9))
    .option('--stat', 'a summary of the files changed (git diff --stat)')
    .option('--json', 'print {"sessionId","turn","from","diff"}')
    .action(async (sessionId: string, flags: { turn?: number; stat?: boolean; json?: boolean }) => {
      const ctx = await openClient();
      try {
        const result = await ctx.client
          .session(sessionId)
          .diff({ stat: flags.stat === true, ...(flags.turn === undefined ? {} : { turn: flags.turn }) })
          .catch((error: unknown) => Promise.reject(sessionCommandError(error)));
        if (flags.json === true) printJson(result);
        else process.stdout.write(result.diff);
      } finally {
        await ctx.close();
      }
    });
}
