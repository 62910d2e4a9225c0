import type { Command } from 'commander';
import { redactUrl } from '../../../runtime/redis/index.ts';
import { RuntimeMetrics } from '../../../runtime/metrics.ts';
import { startServer } from '../../http/server.ts';
import { createLogger } from '../../log.ts';
import { CliError, openRuntime } from '../context.ts';
import { ExitCode } from '../exit-codes.ts';
import { parseIntegerOption } from '../parse-options.ts';

export function registerServe(program: Command): void {
  program
    .command('serve')
    .description('Serve the HTTP API, the dashboard (/) and Bull Board (/queues) until SIGTERM / Ctrl+C. Bound to anything but loopback, SESSIOND_API_TOKEN is required and every POST/PUT/DELETE needs it as a bearer token')
    .option('--host <host>', 'address to bind (default 127.0.0.1, or SESSIOND_HTTP_HOST)')
    .option('--port <port>', 'port (default 7420, or SESSIOND_HTTP_PORT; 0 picks a free one)', parseIntegerOption('--port', 0, 65535))
    .action(async (flags: { host?: string; port?: number }) => {
      process.exitCode = await runServe(flags);
    });
}

async function runServe(flags: { host?: string; port?: number }): Promise<number> {
  const log = createLogger('sessiond-http');
  const ctx = await openRuntime({ 'http.host': flags.host, 'http.port': flags.port });
  const { config, runtime } = ctx;
  const metrics = new RuntimeMetrics(runtime, { workerStaleMs: Math.max(5000, 3 * config.worker.heartbeat) });
  let server;
  try {
    server = await startServer({ runtime, config, logger: log, metrics });
  } catch (error) {
    await ctx.close();
    throw new CliError((error as Error).message, ExitCode.usage);
  }
  metrics.start(5000);
  log.info({ listen: server.url, redis: redactUrl(ctx.url), prefix: config.prefix, auth: config.http.token === undefined ? 'none' : 'bearer token for POST/PUT/DELETE' }, 'serving');
  process.stderr.write(`sessiond serving ${server.url} — dashboard ${server.url}/ · API ${server.url}/openapi.json · queue ${server.url}/queues · metrics ${server.url}/metrics; Ctrl+C to stop\n`);
  await new Promise<void>((resolve) => {
    const stop = (signal: string): void => {
      log.info({ signal }, 'shutting down');
      resolve();
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  metrics.stop();
  await server.close(5000);
  await ctx.close();
  log.info({}, 'stopped');
  return ExitCode.ok;
}
