import type { Command } from 'commander';
import type { Config } from '../../../config/config.ts';
import { CliError } from '../cli-error.ts';
import { ExitCode } from '../exit-codes.ts';

// The command; what it runs is loaded when it runs (see ./agents-action.ts).
export function registerAgents(program: Command): void {
  program
    .command('agents')
    .description(
      'List every agent this host can run (the registry and its configured acp:<name> agents): CLI version, resume, permission knob',
    )
    .option('--json', 'print them as JSON')
    .action(async (flags: { json?: boolean }) => {
      // Split point: the configuration and the agents load when `agents` runs, not for `--help`.
      const [{ loadConfig }, { describeAgents }] = await Promise.all([
        import('../../../config/config.ts'),
        import('./agents-action.ts'),
      ]);
      let config: Config;
      try {
        config = loadConfig();
      } catch (error) {
        throw new CliError(`configuration: ${(error as Error).message}`);
      }
      const rows = await describeAgents(config);
      if (flags.json === true) process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
      else
        for (const row of rows)
          process.stdout.write(
            `${row.name}\n  command: ${row.command}\n  version: ${row.version ?? (row.installed ? 'unknown (no answer to --version)' : `not installed (no ${row.command} here)`)}\n  resume: ${row.resume}\n  permissions: ${row.permissions}\n  sandbox: ${row.sandbox}\n`,
          );
      process.exitCode = ExitCode.ok;
    });
}
