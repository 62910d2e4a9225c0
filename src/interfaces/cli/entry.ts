import type { Command } from 'commander';
import { baseProgram, overrideExits, runProgram } from './program-base.ts';

type Register = (program: Command) => void;

/**
 * The commands an operator runs in a loop, by the first word of the command line, each with the
 * module that registers it: `sessiond inspect ID` loads that module alone, not the other commands
 * (main.ts, which registers all of them, is for `--help` and everything else). The program each
 * gives is the whole program's for that command: test/interfaces/cli/entry.test.ts compares the
 * two (the same commands, options and help).
 */
export const FAST_COMMANDS: Readonly<Record<string, () => Promise<Register>>> = {
  inspect: async () => (await import('./commands/inspect.ts')).registerInspect,
  list: async () => (await import('./commands/list.ts')).registerList,
  enqueue: async () => (await import('./commands/enqueue.ts')).registerEnqueue,
  watch: async () => (await import('./commands/watch.ts')).registerWatch,
  cancel: async () => (await import('./commands/cancel.ts')).registerCancel,
  retry: async () => (await import('./commands/retry.ts')).registerRetry,
  prompts: async () => (await import('./commands/prompts.ts')).registerPrompts,
  delete: async () => (await import('./commands/delete.ts')).registerDelete,
  deletions: async () => (await import('./commands/delete.ts')).registerDelete,
  export: async () => (await import('./commands/transfer.ts')).registerTransfer,
  import: async () => (await import('./commands/transfer.ts')).registerTransfer,
  'retry-policy': async () => (await import('./commands/retry-policy.ts')).registerRetryPolicy,
};

/** The program for this command line: only its command when FAST_COMMANDS knows it, else the whole program. */
export async function programFor(argv: readonly string[]): Promise<Command> {
  const name = argv[2];
  const load = name === undefined || !Object.hasOwn(FAST_COMMANDS, name) ? undefined : FAST_COMMANDS[name];
  if (load === undefined) return (await import('./main.ts')).buildProgram();
  const program = baseProgram();
  (await load())(program);
  return overrideExits(program);
}

/** Runs the CLI (the `sessiond` executable); returns the process exit code. Never throws. */
export async function main(argv: readonly string[]): Promise<number> {
  return runProgram(await programFor(argv), argv);
}
