import type { Command } from 'commander';
import { baseProgram, overrideExits, runProgram } from './program-base.ts';

type Register = (program: Command) => void;

/**
 * The commands an operator runs in a loop, by the first word of the command line, each with the
 * module that registers it: `sessiond inspect ID` loads that module alone, not the other commands
 * (main.ts, which registers all of them, is for `--help` and everything else). The program each
 * gives is the whole program's for that command: test/interfaces/cli/entry.test.ts compares the
 * two (the same commands, options and help).
 *
 * The package runs these from one bundle (dist/cli/, scripts/bundle-cli.mjs): this module, the
 * commands, the code they reach and the pure-JavaScript packages, in chunks loaded as the imports
 * below ask for them (these imports are the bundle's split points, with open-client.ts, where a client command's action
 * loads the runtime; the code they reach imports statically), so a command reads a few files rather
 * than hundreds. Nothing of a command is loaded until a command line asks for it.
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

/** The program for this command line when FAST_COMMANDS knows its command (that command alone), else undefined. */
export async function fastProgram(argv: readonly string[]): Promise<Command | undefined> {
  const name = argv[2];
  const load = name === undefined || !Object.hasOwn(FAST_COMMANDS, name) ? undefined : FAST_COMMANDS[name];
  if (load === undefined) return undefined;
  const register = await load();
  const program = baseProgram();
  register(program);
  return overrideExits(program);
}

/** Runs this command line when FAST_COMMANDS knows its command; returns the exit code, or undefined for any other command line (entry.ts's main runs those). Never throws. */
export async function runFast(argv: readonly string[]): Promise<number | undefined> {
  const program = await fastProgram(argv);
  if (program === undefined) return undefined;
  return runProgram(program, argv);
}
