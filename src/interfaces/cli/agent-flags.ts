import { Option, type Command } from 'commander';
import { THINKING_LEVELS } from '../../agents/pi/thinking-levels.ts';
import { CliError } from './cli-error.ts';
import { ExitCode } from './exit-codes.ts';
import type { RetryFlags } from './retry-flags.ts';
import type { WhenBusy } from '../../policy/index.ts';
import { collectAgentOption, parseDurationOption } from './parse-options.ts';

/** The agent flags `run` and `enqueue` share. */
export interface AgentFlags {
  agentOption?: Record<string, unknown>;
  cwd?: string;
  provider?: string;
  model?: string;
  thinking?: string;
  agentDir?: string;
  idleTimeout?: number;
}

/** The agent options these flags ask for: `--agent-option` entries first, the named flags over them. */
export function agentOptionsFromFlags(flags: AgentFlags): Record<string, unknown> {
  return {
    ...(flags.agentOption ?? {}),
    ...(flags.cwd === undefined ? {} : { cwd: flags.cwd }),
    ...(flags.provider === undefined ? {} : { provider: flags.provider }),
    ...(flags.model === undefined ? {} : { model: flags.model }),
    ...(flags.thinking === undefined ? {} : { thinking: flags.thinking }),
    ...(flags.agentDir === undefined ? {} : { agentDir: flags.agentDir }),
    ...(flags.idleTimeout === undefined ? {} : { idleTimeoutMs: flags.idleTimeout }),
  };
}

/** The flags of a prompt for a worker's turn, shared by `enqueue` and `schedule add`. */
export interface TurnFlags extends RetryFlags, AgentFlags {
  agent?: string;
  retention?: string;
  tenant?: string;
  priority?: number;
  repo?: string;
  ref?: string;
  whenBusy?: WhenBusy;
  json?: boolean;
}

/**
 * A worker turn's options from `enqueue`'s flags (`schedule add` takes the same): the agent, its options and the
 * workspace's repository. `--ref` without `--repo` is a usage error.
 */
export function turnOptionsFromFlags(
  flags: AgentFlags & { agent?: string; repo?: string; ref?: string },
): Record<string, unknown> {
  if (flags.ref !== undefined && flags.repo === undefined)
    throw new CliError('--ref: goes with --repo (the repository it names a ref of)', ExitCode.usage);
  return {
    ...(flags.agent === undefined ? {} : { agent: flags.agent }),
    ...agentOptionsFromFlags(flags),
    ...(flags.repo === undefined
      ? {}
      : { workspace: { repo: flags.repo, ...(flags.ref === undefined ? {} : { ref: flags.ref }) } }),
  };
}

/** Adds the agent flags to `run` (the agent runs here) or `enqueue` (it runs on a worker's host: `onWorker`). */
export function addAgentFlagOptions(command: Command, where: { onWorker: boolean }): Command {
  const host = where.onWorker ? " on the worker's host" : '';
  return command
    .option(
      '--agent-option <key=value>',
      'an option of the chosen agent without a flag of its own (e.g. permissionMode=acceptEdits, sandbox=workspace-write, approvalMode=yolo); repeatable',
      collectAgentOption,
    )
    .option('--cwd <dir>', `the agent's working directory${host}`)
    .option('--provider <name>', 'model provider (pi --provider)')
    .option('--model <id>', 'model id (pi --model)')
    .addOption(new Option('--thinking <level>', 'thinking level').choices(THINKING_LEVELS))
    .option(
      '--agent-dir <dir>',
      where.onWorker
        ? "the pi agent dir on the worker's host to take models and auth from"
        : 'the pi agent dir to take models and auth from (default $PI_CODING_AGENT_DIR or ~/.pi/agent)',
    )
    .option(
      '--idle-timeout <duration>',
      `fail ${where.onWorker ? 'an attempt' : 'the attempt'} as timeout after this long without output (e.g. 90s, 10m)`,
      parseDurationOption('--idle-timeout'),
    );
}
