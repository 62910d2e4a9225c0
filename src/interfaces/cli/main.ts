import type { Command } from 'commander';
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
import { registerTurns } from './commands/turns.ts';
import { registerTransfer } from './commands/transfer.ts';
import { registerRetryPolicy } from './commands/retry-policy.ts';
import { registerDemo } from './commands/demo.ts';
import { registerServe } from './commands/serve.ts';
import { registerPolicy } from './commands/policy.ts';
import { registerAgents } from './commands/agents.ts';
import { registerDoctor } from './commands/doctor.ts';
import { registerApprovals } from './commands/approve.ts';
import { registerAcp } from './commands/acp.ts';
import { registerWebhooks } from './commands/webhooks.ts';
import { registerSchedule } from './commands/schedule.ts';
import { baseProgram, overrideExits, runProgram } from './program-base.ts';

/** The whole program, every command registered (`sessiond --help`, and any command fast.ts does not list). */
export function buildProgram(): Command {
  const program = baseProgram();
  registerNormalize(program);
  registerRun(program);
  registerWorker(program);
  registerEnqueue(program);
  registerWatch(program);
  registerInspect(program);
  registerList(program);
  registerCancel(program);
  registerDispatch(program);
  registerWebhooks(program);
  registerRetry(program);
  registerResume(program);
  registerPrompts(program);
  registerApprovals(program);
  registerAcp(program);
  registerDelete(program);
  registerTurns(program);
  registerTransfer(program);
  registerRetryPolicy(program);
  registerSchedule(program);
  registerPolicy(program);
  registerAgents(program);
  registerDoctor(program);
  registerDemo(program);
  registerServe(program);
  return overrideExits(program);
}

/** Runs the CLI; returns the process exit code. Never throws. */
export async function main(argv: readonly string[]): Promise<number> {
  return runProgram(buildProgram(), argv);
}
