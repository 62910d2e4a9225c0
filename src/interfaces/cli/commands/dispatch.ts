import type { Command } from 'commander';
import { hasErrorCode } from '../../../errors.ts';
import type { DispatchClient } from '../../../api/client.ts';
import { CliError } from '../cli-error.ts';
import { ExitCode } from '../exit-codes.ts';
import { printJson } from '../present.ts';
import { openClient } from '../open-client.ts';

/** `sessiond pause`, `sessiond resume-dispatch` and `sessiond limits`: the operator's dispatch controls. */
export function registerDispatch(program: Command): void {
  program
    .command('pause')
    .description(
      'Pause starting attempts, fleet-wide or under one fleet limit: running turns finish, nothing new starts, cancels still work',
    )
    .option('--limit <name>', 'only the sessions under this fleet limit')
    .option('--json', 'print {"paused"}')
    .action(async (flags: { limit?: string; json?: boolean }) => {
      await withDispatch(async (dispatch) => {
        const result = await dispatch.pause(flags.limit);
        if (flags.json === true) printJson(result);
        else
          process.stdout.write(
            `dispatch paused ${flags.limit === undefined ? 'fleet-wide' : `under limit ${flags.limit}`} (paused: ${result.paused.join(', ')})\n`,
          );
      });
    });
  program
    .command('resume-dispatch')
    .description(
      'Start attempts again, fleet-wide or under one fleet limit; the sessions waiting for it are woken in order',
    )
    .option('--limit <name>', 'only the sessions under this fleet limit')
    .option('--json', 'print {"paused","woken"}')
    .action(async (flags: { limit?: string; json?: boolean }) => {
      await withDispatch(async (dispatch) => {
        const result = await dispatch.resume(flags.limit);
        if (flags.json === true) printJson(result);
        else
          process.stdout.write(
            `dispatch resumed ${flags.limit === undefined ? 'fleet-wide' : `under limit ${flags.limit}`}; ${result.woken} waiting sessions woken${result.paused.length > 0 ? `; still paused: ${result.paused.join(', ')}` : ''}\n`,
          );
      });
    });
  program
    .command('limits')
    .description('The fleet limits: what each holds and how many sessions wait, cooldowns, paused dispatch')
    .option('--json', 'print the whole view as JSON')
    .action(async (flags: { json?: boolean }) => {
      await withDispatch(async (dispatch) => {
        const view = await dispatch.status();
        if (flags.json === true) {
          printJson(view);
          return;
        }
        const lines = [view.paused ? 'dispatch: PAUSED fleet-wide' : 'dispatch: running'];
        if (view.limits.length === 0) lines.push('no fleet limits configured (SESSIOND_LIMITS)');
        for (const l of view.limits) {
          const caps = [
            l.maxConcurrent === null ? null : `maxConcurrent ${l.maxConcurrent}`,
            l.maxStartsPerMinute === null ? null : `maxStartsPerMinute ${l.maxStartsPerMinute}`,
            l.maxTokensPerMinute === null ? null : `maxTokensPerMinute ${l.maxTokensPerMinute}`,
          ]
            .filter((c) => c !== null)
            .join(', ');
          lines.push(`${l.name}: ${caps}; in use ${l.inUse}, waiting ${l.waiting}${l.paused ? ', PAUSED' : ''}`);
          for (const k of l.keys)
            if (k.key !== l.name || k.cooldownUntil !== null)
              lines.push(
                `  ${k.key}: in use ${k.inUse}, waiting ${k.waiting}${k.cooldownUntil === null ? '' : `, cooling down until ${new Date(k.cooldownUntil).toISOString()}`}`,
              );
        }
        process.stdout.write(`${lines.join('\n')}\n`);
      });
    });
}

async function withDispatch(fn: (dispatch: DispatchClient) => Promise<void>): Promise<void> {
  const ctx = await openClient();
  try {
    await fn(ctx.client.dispatch);
  } catch (error) {
    if (hasErrorCode(error, 'invalid_input')) throw new CliError(error.message, ExitCode.usage);
    throw error;
  } finally {
    await ctx.close();
  }
}
