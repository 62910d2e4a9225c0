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
    .description('Serve the HTTP API, the dashboard (/) and Bull Board (/queues) until SIGTERM / Ctrl+C. With a token configured (SESSIOND_API_TOKEN, http.tokens), every route but /healthz, /readyz and the dashboard shell needs one whose scope covers it; bound to anything but loopback, a token is required')
    .option('--host <host>', 'address to bind (default 127.0.0.1, or SESSIOND_HTTP_HOST)')
    .option('--port <port>', 'port (default 7420, or SESSIOND_HTTP_PORT; 0 picks a free one)', parseIntegerOption('--port', 0, 65535))
    .option('--tls-cert <file>', 'serve HTTPS with this PEM certificate (with --tls-key; or SESSIOND_TLS_CERT)')
    .option('--tls-key <file>', 'the PEM private key of --tls-cert (or SESSIOND_TLS_KEY)')
    .action(async (flags: ServeFlags) => {
      process.exitCode = await runServe(flags);
    });
}

interface ServeFlags {
  host?: string;
  port?: number;
  tlsCert?: string;
  tlsKey?: string;
}

async function runServe(flags: ServeFlags): Promise<number> {
  const log = createLogger('sessiond-http');
  const ctx = await openRuntime({ 'http.host': flags.host, 'http.port': flags.port, 'http.tlsCert': flags.tlsCert, 'http.tlsKey': flags.tlsKey });
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
  log.info({ listen: server.url, redis: redactUrl(ctx.url), prefix: config.prefix, auth: config.http.token === undefined && config.http.tokens.length === 0 ? 'none (loopback)' : `${config.http.tokens.length + (config.http.token === undefined ? 0 : 1)} scoped token(s)`, tls: config.http.tlsCert !== undefined }, 'serving');
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
