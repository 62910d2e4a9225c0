import { readFile, writeFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { CliError } from '../cli-error.ts';
import { ExitCode } from '../exit-codes.ts';
import { printJson } from '../present.ts';
import { hasErrorCode } from '../../../errors.ts';
import { openClient } from '../open-client.ts';

export function registerTransfer(program: Command): void {
  program
    .command('export')
    .description(
      'Write a session as one versioned JSON-lines archive (to stdout, or --out FILE); exit 3 for an unknown id',
    )
    .argument('<sessionId>')
    .option('--out <file>', 'write the archive to this file instead of stdout')
    .action(async (sessionId: string, flags: { out?: string }) => {
      const ctx = await openClient();
      try {
        const archive = await ctx.client.session(sessionId).export();
        if (flags.out === undefined) process.stdout.write(archive);
        else
          await writeFile(flags.out, archive, { flag: 'wx' }).catch((error: NodeJS.ErrnoException) => {
            throw new CliError(
              `--out: cannot write ${flags.out}: ${error.code === 'EEXIST' ? 'the file exists' : error.message}`,
              ExitCode.usage,
            );
          });
      } catch (error) {
        if (hasErrorCode(error, 'not_found')) throw new CliError(error.message, ExitCode.notFound);
        if (hasErrorCode(error, 'invalid_input')) throw new CliError(error.message, ExitCode.usage);
        // Being deleted, or a workspace this client cannot read.
        if (hasErrorCode(error, 'conflict')) throw new CliError(error.message, ExitCode.failed);
        throw error;
      } finally {
        await ctx.close();
      }
    });
  program
    .command('import')
    .description(
      'Restore a session from an archive of `sessiond export` (FILE, or - for stdin); refused whole, with nothing written, when it is not valid or the id exists',
    )
    .argument('<file>')
    .option('--as <sessionId>', 'import it under this id (default: the id it was exported with)')
    .option('--json', 'print {"sessionId","messages","state"}')
    .action(async (file: string, flags: { as?: string; json?: boolean }) => {
      let text: string;
      try {
        text = file === '-' ? await readStdin() : await readFile(file, 'utf8');
      } catch (error) {
        throw new CliError(`cannot read ${file}: ${(error as Error).message}`, ExitCode.usage);
      }
      const ctx = await openClient();
      try {
        const result = await ctx.client.sessions.import(text, flags.as === undefined ? {} : { as: flags.as });
        if (flags.json === true) printJson(result);
        else {
          const conversation = {
            kept: '',
            forked: '; the agent conversation continues as a copy',
            new: '; the agent conversation could not be copied: the next turn starts a new one',
          }[result.conversation];
          process.stdout.write(
            `imported ${result.sessionId} (${result.messages} messages, state ${result.state}${conversation})\n`,
          );
        }
      } catch (error) {
        if (hasErrorCode(error, 'invalid_archive'))
          throw new CliError(`${file}: ${error.message}; nothing was written`, ExitCode.usage);
        if (hasErrorCode(error, 'conflict')) throw new CliError(error.message, ExitCode.failed);
        throw error;
      } finally {
        await ctx.close();
      }
    });
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
