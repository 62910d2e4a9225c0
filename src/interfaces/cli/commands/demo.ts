import type { Command } from 'commander';
import { parseIntegerOption } from '../parse-options.ts';

// The command; what it runs is loaded when it runs (see ./demo-action.ts).
export function registerDemo(program: Command): void {
  program
    .command('demo')
    .description(
      'Run real pi sessions through the queue against a built-in scripted model, offline: streaming, a tool call, a retried failure, a non-retryable one, a cancel',
    )
    .option(
      '--serve-model',
      'only serve the scripted OpenAI-compatible model on 127.0.0.1 (to try a pi setup offline), until Ctrl+C',
    )
    .option('--port <n>', 'port for --serve-model (default: a free one)', parseIntegerOption('--port', 0, 65535), 0)
    .action(async (flags: { serveModel?: boolean; port: number }) => {
      process.exitCode =
        flags.serveModel === true
          ? await (await import('./demo-action.ts')).serveModel(flags.port)
          : await (await import('./demo-action.ts')).runDemo();
    });
}
