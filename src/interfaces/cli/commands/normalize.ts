import { createReadStream } from 'node:fs';
import type { Command } from 'commander';
import { Option } from 'commander';
import { DEFAULT_AGENT } from '../../../agents/default-agent.ts';
import type { AgentName } from '../../../agents/registry.ts';
import { BUILTIN_AGENT_NAMES as AGENT_NAMES } from '../agent-names.ts';
import type { CliMessage } from '../../../protocol/index.ts';
import { ExitCode } from '../exit-codes.ts';
import { parseIntegerOption } from '../parse-options.ts';
import { splitLines } from '../../../process/split-lines.ts';

export function registerNormalize(program: Command): void {
  program
    .command('normalize')
    .description(
      "Read an agent's raw JSON lines (pi's --mode json by default) from FILE or stdin and print one normalized message per line",
    )
    .argument('[file]', 'a file of the agent\'s raw output; stdin when omitted or "-"')
    .addOption(
      new Option('--agent <name>', 'whose stream it is (acp: any ACP agent)')
        .choices([...AGENT_NAMES, 'acp'])
        .default(DEFAULT_AGENT),
    )
    .option(
      '--exit-code <n>',
      'treat end of input as pi exiting with this code',
      parseIntegerOption('--exit-code', -255, 255),
      0,
    )
    .option(
      '--resume <sessionId>',
      'the agent session id the run was asked to resume (session.resumed instead of session.started)',
    )
    .action(async (file: string | undefined, opts: { exitCode: number; resume?: string; agent: AgentName }) => {
      process.exitCode = await normalize(file, opts);
    });
}

async function normalize(
  file: string | undefined,
  opts: { exitCode: number; resume?: string; agent: AgentName },
): Promise<number> {
  // Split point: the agents (their mappers) load when `normalize` runs, not for `--help`.
  const { agentDefinition } = await import('../../../agents/registry.ts');
  const source = file === undefined || file === '-' ? process.stdin : createReadStream(file);
  const mapper = agentDefinition(opts.agent === ('acp' as AgentName) ? 'acp:any' : opts.agent).createMapper(
    opts.resume === undefined ? {} : { resumeSessionId: opts.resume },
  );
  const write = (messages: CliMessage[]): void => {
    for (const message of messages) process.stdout.write(`${JSON.stringify(message)}\n`);
  };
  try {
    for await (const line of splitLines(source)) write(mapper.push(line));
  } catch (error) {
    process.stderr.write(`sessiond normalize: cannot read ${file ?? 'stdin'}: ${(error as Error).message}\n`);
    return ExitCode.usage;
  }
  write(mapper.complete({ exitCode: opts.exitCode, signal: null, stopReason: null, stderrTail: '' }));
  return ExitCode.ok;
}
