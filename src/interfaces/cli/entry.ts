import type { Command } from 'commander';
import { fastProgram } from './fast.ts';
import { runProgram } from './program-base.ts';

/** The program for this command line: only its command when FAST_COMMANDS knows it (fast.ts), else the whole program. */
export async function programFor(argv: readonly string[]): Promise<Command> {
  return (await fastProgram(argv)) ?? (await import('./main.ts')).buildProgram();
}

/** Runs the CLI; returns the process exit code. Never throws. (The package's executable runs fast.ts's bundle first: bin/sessiond.mjs.) */
export async function main(argv: readonly string[]): Promise<number> {
  return runProgram(await programFor(argv), argv);
}
