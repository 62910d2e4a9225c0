import type { Command } from 'commander';
import { parseIntegerOption } from '../parse-options.ts';
import type { ServeFlags } from './serve-action.ts';

// The command; what it runs is loaded when it runs (see ./serve-action.ts).
export function registerServe(program: Command): void {
  program
    .command('serve')
    .description(
      'Serve the HTTP API, the dashboard (/) and Bull Board (/queues) until SIGTERM / Ctrl+C. With a token configured (SESSIOND_API_TOKEN, http.tokens), every route but /healthz, /readyz and the dashboard shell needs one whose scope covers it; bound to anything but loopback, a token is required',
    )
    .option('--host <host>', 'address to bind (default 127.0.0.1, or SESSIOND_HTTP_HOST)')
    .option(
      '--port <port>',
      'port (default 7420, or SESSIOND_HTTP_PORT; 0 picks a free one)',
      parseIntegerOption('--port', 0, 65535),
    )
    .option('--tls-cert <file>', 'serve HTTPS with this PEM certificate (with --tls-key; or SESSIOND_TLS_CERT)')
    .option('--tls-key <file>', 'the PEM private key of --tls-cert (or SESSIOND_TLS_KEY)')
    .action(async (flags: ServeFlags) => {
      process.exitCode = await (await import('./serve-action.ts')).runServe(flags);
    });
}
