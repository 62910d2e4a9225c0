import { Command, CommanderError } from 'commander';
import { registerNormalize } from './commands/normalize.ts';
import { registerRun } from './commands/run.ts';
import { registerWorker } from './commands/worker.ts';
import { registerEnqueue } from './commands/enqueue.ts';
import { registerWatch } from './commands/watch.ts';
import { registerInspect } from './commands/inspect.ts';
import { registerList } from './commands/list.ts';
import { registerCancel } from './commands/cancel.ts';
import { registerDispatch } from './commands/dispatch.ts';
import { registerRetry } from './commands/retry.ts';
import { registerResume } from './commands/resume.ts';
import { registerPrompts } from './commands/prompts.ts';
import { registerDelete } from './commands/delete.ts';
import { registerTransfer } from './commands/transfer.ts';
import { registerRetryPolicy } from './commands/retry-policy.ts';
import { registerDemo } from './commands/demo.ts';
import { registerServe } from './commands/serve.ts';
import { registerPolicy } from './commands/policy.ts';
import { registerAgents } from './commands/agents.ts';
import { registerApprovals } from './commands/approve.ts';
import { registerAcp } from './commands/acp.ts';
import { CliError } from './cli-error.ts';
import { EXIT_CODES_HELP, ExitCode } from './exit-codes.ts';

export function buildProgram(): Command {
  const program = new Command('sessiond')
    .description('Chat sessions with CLI coding agents as durable actors')
    .version('0.1.0')
    .addHelpText('after', EXIT_CODES_HELP)
    .exitOverride()
    .configureOutput({ writeErr: (text) => process.stderr.write(text) });
  registerNormalize(program);
  registerRun(program);
  registerWorker(program);
  registerEnqueue(program);
  registerWatch(program);
  registerInspect(program);
  registerList(program);
  registerCancel(program);
  registerDispatch(program);
  registerRetry(program);
  registerResume(program);
  registerPrompts(program);
  registerApprovals(program);
  registerAcp(program);
  registerDelete(program);
  registerTransfer(program);
  registerRetryPolicy(program);
  registerPolicy(program);
  registerAgents(program);
  registerDemo(program);
  registerServe(program);
  const override = (command: Command): void => {
    command.exitOverride();
    command.commands.forEach(override);
  };
  program.commands.forEach(override);
  return program;
}

/** Runs the CLI; returns the process exit code. Never throws. */
export async function main(argv: readonly string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync([...argv]);
    return typeof process.exitCode === 'number' ? process.exitCode : ExitCode.ok;
  } catch (error) {
    if (error instanceof CommanderError) {
      if (error.code === 'commander.helpDisplayed' || error.code === 'commander.version' || error.code === 'commander.help') return ExitCode.ok;
      return ExitCode.usage;
    }
    if (error instanceof CliError) {
      process.stderr.write(`sessiond: ${error.message}\n`);
      return error.exitCode;
    }
    process.stderr.write(`sessiond: ${(error as Error).message}\n`);
    return ExitCode.failed;
  }
}
