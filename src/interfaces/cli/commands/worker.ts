import type { Command } from 'commander';
import { parseIntegerOption } from '../parse-options.ts';

// The command; what it runs is loaded when it runs (see ./worker-action.ts).
export function registerWorker(program: Command): void {
  program
    .command('worker')
    .description(
      'Run a worker until SIGTERM / Ctrl+C (graceful: running attempts get the shutdown grace, then are stopped and retried elsewhere)',
    )
    .option('--concurrency <n>', 'sessions driven at once', parseIntegerOption('--concurrency', 1, 256))
    .action(async (flags: { concurrency?: number }) => {
      process.exitCode = await (await import('./worker-action.ts')).runWorker(flags);
    });
}
