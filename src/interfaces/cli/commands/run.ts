import type { Command } from 'commander';
import { DEFAULT_AGENT } from '../../../agents/default-agent.ts';
import type { AnyAgentName } from '../../../agents/registry.ts';
import { BUILTIN_AGENT_NAMES as AGENT_NAMES } from '../agent-names.ts';
import type { CliMessage } from '../../../protocol/index.ts';
import type { Config } from '../../../config/config.ts';
import { addAgentFlagOptions, agentOptionsFromFlags, type AgentFlags } from '../agent-flags.ts';
import { CliError } from '../cli-error.ts';
import { ExitCode } from '../exit-codes.ts';
import { InvalidArgumentError, Option } from 'commander';

interface RunFlags extends AgentFlags {
  agent: AnyAgentName;
  session?: string | boolean;
  sessionDir?: string;
  json?: boolean;
}

export function registerRun(program: Command): void {
  const command = program
    .command('run')
    .description('Run one attempt of the agent (no Redis, no retry): stream the answer, exit 0/1/130')
    .argument('<prompt>', 'the prompt')
    .addOption(
      new Option(
        '--agent <name>',
        `the agent CLI: ${AGENT_NAMES.join(', ')}, or acp:<name> (an ACP agent of this host's configuration)`,
      )
        .argParser(parseAgent)
        .default(DEFAULT_AGENT),
    );
  addAgentFlagOptions(command, { onWorker: false })
    .option('--session <id>', 'resume this pi session')
    .option('--no-session', 'do not save a pi session')
    .option('--session-dir <dir>', 'where pi keeps session files')
    .option('--json', 'print the normalized messages as JSON lines')
    .action(async (prompt: string, flags: RunFlags) => {
      process.exitCode = await run(prompt, flags);
    });
}

function parseAgent(value: string): AnyAgentName {
  // Checked without loading the agents (the registry imports every one): a built-in name, or acp:<name>.
  if (!(AGENT_NAMES as readonly string[]).includes(value) && !/^acp:[A-Za-z0-9_.-]+$/.test(value))
    throw new InvalidArgumentError(`must be one of ${AGENT_NAMES.join(', ')} or acp:<name>`);
  return value as AnyAgentName;
}

async function run(prompt: string, flags: RunFlags): Promise<number> {
  // Split point: the configuration and the agents load when `run` runs, not for `--help`.
  const [{ agentHostOptions, loadConfig }, { agentDefinition }, { acpAgentName }, { deploymentPolicy }] =
    await Promise.all([
      import('../../../config/config.ts'),
      import('../../../agents/registry.ts'),
      import('../../../agents/acp/registry-entry.ts'),
      import('../../../runtime/deployment-policy.ts'),
    ]);
  let config: Config;
  try {
    config = loadConfig();
  } catch (error) {
    throw new CliError(`configuration: ${(error as Error).message}`);
  }
  const host = agentHostOptions(config, AGENT_NAMES)[flags.agent];
  let allow;
  try {
    allow = deploymentPolicy(config).network[flags.agent] ?? [];
  } catch (error) {
    throw new CliError(`configuration: ${(error as Error).message}`);
  }
  const acp = acpAgentName(flags.agent);
  if (acp && typeof host?.command !== 'string') {
    throw new CliError(
      `--agent ${flags.agent}: no ACP agent of that name is configured on this host (agents."${flags.agent}" with a command, in SESSIOND_AGENT_OPTIONS or the config file)`,
    );
  }
  if (acp && flags.session === false) throw new CliError(`--no-session: ${flags.agent} keeps its sessions itself`);
  const options: Record<string, unknown> = {
    // An ACP agent is the host's configuration (command, args, env); the others get the agent's
    // env as a worker would build it (sealed: the variables named in SESSIOND_AGENT_ENV, the
    // agent's configured env, the state dir for its managed home). Then the flags.
    ...(acp ? host : { env: host?.env ?? {} }),
    // pi's executable, agent dir and session dir are this host's, as for a worker: in a sandbox the
    // managed agent dir is read-only, so pi cannot keep its session file there.
    ...(flags.agent === 'pi' ? pickDefined(host, ['command', 'agentDir', 'sessionDir']) : {}),
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
    for await (const message of agentDefinition(flags.agent).run(
      { text: prompt, resumeSessionId, options },
      {
        signal: controller.signal,
        // As a worker runs it: the model through a bridge holding the key, other hosts as
        // policy.network lists them. In a sandbox that is the attempt's only network.
        egress: {
          sessionId: 'run',
          allow,
          onRefused: (refusal) =>
            process.stderr.write(`sessiond: egress refused ${refusal.host}:${refusal.port} (${refusal.reason})\n`),
        },
      },
    )) {
      if (flags.json === true) process.stdout.write(`${JSON.stringify(message)}\n`);
      else if (message.type === 'assistant') {
        process.stdout.write(message.content.text);
        endsWithNewline = message.content.text.endsWith('\n');
      }
      if (message.type === 'session.started' || message.type === 'session.resumed')
        sessionId = message.content.sessionId;
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
  if (sessionId !== undefined && flags.json !== true && flags.session !== false)
    process.stderr.write(`session: ${sessionId}\n`);
  if (terminal?.type === 'terminal.failed') {
    process.stderr.write(`sessiond: failed (${terminal.content.category}): ${terminal.content.text}\n`);
    return ExitCode.failed;
  }
  return ExitCode.ok;
}

/** The entries of `options` named in `keys` that are set. */
function pickDefined(options: Record<string, unknown> | undefined, keys: readonly string[]): Record<string, unknown> {
  return Object.fromEntries(keys.filter((key) => options?.[key] !== undefined).map((key) => [key, options![key]]));
}
