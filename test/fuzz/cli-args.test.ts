import fc from 'fast-check';
import { Command, CommanderError } from 'commander';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/interfaces/cli/main.ts';

const COMMANDS = [
  'run',
  'normalize',
  'worker',
  'enqueue',
  'watch',
  'inspect',
  'list',
  'cancel',
  'retry-policy',
  'demo',
];
const FLAGS = [
  '--json',
  '--follow',
  '--session',
  '--cwd',
  '--model',
  '--provider',
  '--thinking',
  '--agent',
  '--from',
  '--state',
  '--limit',
  '--exit-code',
  '--idle-timeout',
  '--concurrency',
  '--retry-max-attempts',
  '--retry-initial-delay',
  '--retry-max-delay',
  '--retry-multiplier',
  '--retry-jitter',
  '--retry-on',
  '--no-retry',
  '--port',
  '--reason',
  '--help',
  '-h',
  '--version',
  '--',
  '-',
];

/** The program with every action replaced by a recorder: only argument parsing runs. */
function parseOnlyProgram(): { program: Command; ran: string[] } {
  const program = buildProgram();
  const ran: string[] = [];
  const silence = (command: Command): void => {
    command.configureOutput({ writeOut: () => undefined, writeErr: () => undefined, outputError: () => undefined });
    command.action(() => {
      ran.push(command.name());
    });
    command.commands.forEach(silence);
  };
  program.commands.forEach(silence);
  program.configureOutput({ writeOut: () => undefined, writeErr: () => undefined, outputError: () => undefined });
  return { program, ran };
}

const token = fc.oneof(
  fc.constantFrom(
    ...COMMANDS,
    ...FLAGS,
    'get',
    'set',
    'reset',
    'pi',
    'high',
    'extreme',
    '0',
    '-1',
    '7',
    '2s',
    '500ms',
    '1m',
    'soon',
    'full',
    '1.5',
    'network,auth',
    'cosmic',
    '',
  ),
  fc.string({ maxLength: 12 }),
);

describe('CLI arguments, fuzzed', () => {
  it('any argv either parses or is refused with a usage error — never another exception', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...COMMANDS), fc.array(token, { maxLength: 8 }), async (command, rest) => {
        const { program } = parseOnlyProgram();
        try {
          await program.parseAsync(['node', 'sessiond', command, ...rest]);
        } catch (error) {
          expect(error).toBeInstanceOf(CommanderError);
        }
      }),
      { numRuns: 400 },
    );
  });

  it('a bad value is refused naming its option', async () => {
    const cases: Array<[string[], string]> = [
      [['enqueue', '--retry-max-attempts', '0', 'x'], '--retry-max-attempts'],
      [['enqueue', '--retry-initial-delay', 'soon', 'x'], '--retry-initial-delay'],
      [['enqueue', '--retry-jitter', '2', 'x'], '--retry-jitter'],
      [['enqueue', '--retry-on', 'cosmic', 'x'], '--retry-on'],
      [['watch', 'id', '--from', '-3'], '--from'],
      [['worker', '--concurrency', 'many'], '--concurrency'],
      [['run', '--thinking', 'extreme', 'x'], '--thinking'],
    ];
    for (const [argv, option] of cases) {
      const { program } = parseOnlyProgram();
      const error = await program.parseAsync(['node', 'sessiond', ...argv]).then(
        () => null,
        (e: unknown) => e as CommanderError,
      );
      expect(error, argv.join(' ')).toBeInstanceOf(CommanderError);
      expect(error?.message).toContain(option);
    }
  });
});
