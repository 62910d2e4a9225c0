import type { Command } from 'commander';
import { sessionCommandError } from '../cli-error.ts';
import { printJson } from '../present.ts';
import { openClient } from '../open-client.ts';

export function registerPrompts(program: Command): void {
  program
    .command('prompts')
    .description(
      "List a session's queued prompts in the order their turns will run, or remove one (--remove PROMPT_ID); exit 1 when its turn has started, 3 for an unknown id",
    )
    .argument('<sessionId>')
    .option('--remove <promptId>', 'remove this queued prompt (its id as listed)')
    .option('--json', 'print JSON')
    .action(async (sessionId: string, flags: { remove?: string; json?: boolean }) => {
      const ctx = await openClient();
      try {
        if (flags.remove !== undefined) {
          const result = await ctx.client.prompts.remove(sessionId, flags.remove);
          if (flags.json === true) printJson(result);
          else process.stdout.write(`removed prompt ${flags.remove} from ${sessionId}\n`);
          return;
        }
        const prompts = await ctx.client.prompts.list(sessionId);
        if (flags.json === true) printJson({ sessionId, prompts });
        else if (prompts.length === 0) process.stdout.write(`no prompt waits in ${sessionId}\n`);
        else
          for (const p of prompts)
            process.stdout.write(
              `${p.position}. ${p.id}  ${oneLine(p.text)}${p.retryOf === undefined ? '' : `  (retry of turn ${p.retryOf})`}\n`,
            );
      } catch (error) {
        throw sessionCommandError(error);
      } finally {
        await ctx.close();
      }
    });
}

function oneLine(text: string): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > 80 ? `${line.slice(0, 79)}…` : line;
}
