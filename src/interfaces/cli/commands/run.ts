import type { Command } from 'commander';
import { DEFAULT_AGENT } from '../../../agents/default-agent.ts';
import type { AgentName } from '../../../agents/registry.ts';
import { BUILTIN_AGENT_NAMES as AGENT_NAMES } from '../agent-names.ts';
import type { CliMessage } from '../../../protocol/index.ts';
import type { Config } from '../../../config/config.ts';
import { addAgentFlagOptions, agentOptionsFromFlags, type AgentFlags } from '../agent-flags.ts';
import { CliError } from '../cli-error.ts';
import { ExitCode } from '../exit-codes.ts';
import { Option } from 'commander';

interface RunFlags extends AgentFlags {
  agent: AgentName;
  session?: string | boolean;
  sessionDir?: string;
  json?: boolean;
}

export function registerRun(program: Command): void {
  const command = program
    .command('run')
    .description('Run one attempt of the agent (no Redis, no retry): stream the answer, exit 0/1/130')
    .argument('<prompt>', 'the prompt')
    .addOption(new Option('--agent <name>', 'the agent CLI').choices(AGENT_NAMES).default(DEFAULT_AGENT));
  addAgentFlagOptions(command, { onWorker: false })
    .option('--session <id>', 'resume this pi session')
    .option('--no-session', 'do not save a pi session')
    .option('--session-dir <dir>', 'where pi keeps session files')
    .option('--json', 'print the normalized messages as JSON lines')
    .action(async (prompt: string, flags: RunFlags) => {
      process.exitCode = await run(prompt, flags);
    });
}

async function run(prompt: string, flags: RunFlags): Promise<number> {
  const { agentHostOptions, loadConfig } = await import('../../../config/config.ts');
  const { agentDefinition } = await import('../../../agents/registry.ts');
  let config: Config;
  try {
    config = loadConfig();
  } catch (error) {
    throw new CliError(`configuration: ${(error as Error).message}`);
  }
  const options: Record<string, unknown> = {
    // The agent's env as a worker would build it (sealed: the variables named in SESSIOND_AGENT_ENV,
    // the agent's configured env, the state dir for its managed home), and the flags.
    env: agentHostOptions(config, AGENT_NAMES)[flags.agent]?.env ?? {},
    ...agentOptionsFromFlags(flags),
    ...(flags.sessionDir === undefined ? {} : { sessionDir: flags.sessionDir }),
    ...(flags.session === false ? { session: { mode: 'none' } } : {}),
  };
  const resumeSessionId = typeof flags.session === 'string' ? flags.session : null;
  const controller = new AbortController();
  const onSignal = (): void => {
    if (!controller.signal.aborted) process.stderr.write('\nsessiond: stopping the agent…\n');
    controller.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  let terminal: CliMessage | undefined;
  let sessionId: string | undefined;
  let endsWithNewline = true;
  try {
    for await (const message of agentDefinition(flags.agent).run({ text: prompt, resumeSessionId, options }, { signal: controller.signal })) {
      if (flags.json === true) process.stdout.write(`${JSON.stringify(message)}\n`);
      else if (message.type === 'assistant') {
        process.stdout.write(message.content.text);
        endsWithNewline = message.content.text.endsWith('\n');
      }
      if (message.type === 'session.started' || message.type === 'session.resumed') sessionId = message.content.sessionId;
      if (message.type === 'terminal.completed' || message.type === 'terminal.failed') terminal = message;
    }
  } catch (error) {
    if (controller.signal.aborted) {
      if (flags.json !== true && !endsWithNewline) process.stdout.write('\n');
      process.stderr.write('sessiond: cancelled; the agent and its processes are gone\n');
      return ExitCode.interrupted;
    }
    throw error;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  if (flags.json !== true && !endsWithNewline) process.stdout.write('\n');
  if (sessionId !== undefined && flags.json !== true && flags.session !== false) process.stderr.write(`session: ${sessionId}\n`);
  if (terminal?.type === 'terminal.failed') {
    process.stderr.write(`sessiond: failed (${terminal.content.category}): ${terminal.content.text}\n`);
    return ExitCode.failed;
  }
  return ExitCode.ok;
}
