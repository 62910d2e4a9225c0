import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { programFor } from '../../../src/interfaces/cli/entry.ts';
import { FAST_COMMANDS } from '../../../src/interfaces/cli/fast.ts';
import { buildProgram } from '../../../src/interfaces/cli/main.ts';

const argv = (...words: string[]): string[] => ['node', 'sessiond', ...words];

// A command's whole shape as an operator meets it: its help (options, arguments, description) and its sub-commands'.
function shape(command: Command): string[] {
  return [command.helpInformation(), ...command.commands.flatMap(shape)];
}

describe('the fast entry of the CLI', () => {
  const whole = buildProgram();

  it.each(Object.keys(FAST_COMMANDS))('gives `sessiond %s` the whole program’s command, unchanged', async (name) => {
    const fast = await programFor(argv(name));
    const mine = fast.commands.find((c) => c.name() === name);
    const theirs = whole.commands.find((c) => c.name() === name);
    expect(mine).toBeDefined();
    expect(theirs).toBeDefined();
    expect(shape(mine!)).toEqual(shape(theirs!));
    // Whatever else its module registers is the whole program's too.
    for (const other of fast.commands)
      expect(shape(other)).toEqual(shape(whole.commands.find((c) => c.name() === other.name())!));
  });

  it('builds the whole program for --help, help and commands it does not list', async () => {
    const names = whole.commands.map((c) => c.name());
    for (const words of [[], ['--help'], ['help', 'inspect'], ['worker'], ['nonsense']]) {
      expect((await programFor(argv(...words))).commands.map((c) => c.name())).toEqual(names);
    }
  });
});
