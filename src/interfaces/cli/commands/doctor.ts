import type { Command } from 'commander';
import { ExitCode } from '../exit-codes.ts';

// The command; what it runs is loaded when it runs (see ./doctor-action.ts).
export function registerDoctor(program: Command): void {
  program
    .command('doctor')
    .description(
      'Check this deployment: the configuration, Redis (version, mode), the live workers and what each offers, this host’s agent CLIs, the deployment policy; says what looks wrong and how to fix it (exit 1 when something does)',
    )
    .option('--json', 'print the report as JSON')
    .action(async (flags: { json?: boolean }) => {
      // Split point: the configuration, the agents and a reader load when `doctor` runs, not for `--help`.
      const { describeReport, diagnose } = await import('./doctor-action.ts');
      const report = await diagnose();
      process.stdout.write(flags.json === true ? `${JSON.stringify(report, null, 2)}\n` : describeReport(report));
      process.exitCode = report.problems.length === 0 ? ExitCode.ok : ExitCode.failed;
    });
}
