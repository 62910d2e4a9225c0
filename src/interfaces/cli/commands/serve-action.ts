import { createMetrics } from '../../../api/metrics.ts';
import { startWebhookDelivery } from '../../../api/webhooks.ts';
import { redactUrl } from '../../../runtime/redis/index.ts';
import { startServer } from '../../http/server.ts';
import { createLogger } from '../../log.ts';
import { CliError, openServerContext } from '../context.ts';
import { ExitCode } from '../exit-codes.ts';

export interface ServeFlags {
  host?: string;
  port?: number;
  tlsCert?: string;
  tlsKey?: string;
}

export async function runServe(flags: ServeFlags): Promise<number> {
  const log = createLogger('sessiond-http');
  const ctx = await openServerContext({
    'http.host': flags.host,
    'http.port': flags.port,
    'http.tlsCert': flags.tlsCert,
    'http.tlsKey': flags.tlsKey,
  });
  const { config } = ctx;
  // The deployment policy is checked at start (a bad one is a usage error now, not at the first request).
  await ctx.policy().catch(async (error: unknown) => {
    await ctx.close();
    throw error;
  });
  const metrics = createMetrics(ctx.client, { workerStaleMs: Math.max(5000, 3 * config.worker.heartbeat) });
  let server;
  try {
    server = await startServer({ client: ctx.client, config, logger: log, metrics });
  } catch (error) {
    await ctx.close();
    throw new CliError((error as Error).message, ExitCode.usage);
  }
  metrics.start(5000);
  // serve delivers webhook events too (one deliverer per session at a time, fleet-wide: see the outbox).
  const webhooks = startWebhookDelivery(
    ctx.client,
    {
      webhooks: config.webhooks,
      delivery: config.webhookDelivery,
      sessionHosts: (await ctx.policy()).webhookHosts ?? [],
    },
    (level, message, fields) => log[level](fields ?? {}, message),
  );
  log.info(
    {
      listen: server.url,
      redis: redactUrl(ctx.url),
      prefix: config.prefix,
      auth:
        config.http.token === undefined && config.http.tokens.length === 0
          ? 'none (loopback)'
          : `${config.http.tokens.length + (config.http.token === undefined ? 0 : 1)} scoped token(s)`,
      tls: config.http.tlsCert !== undefined,
    },
    'serving',
  );
  process.stderr.write(
    `sessiond serving ${server.url} — dashboard ${server.url}/ · API ${server.url}/openapi.json · queue ${server.url}/queues · metrics ${server.url}/metrics; Ctrl+C to stop\n`,
  );
  await new Promise<void>((resolve) => {
    const stop = (signal: string): void => {
      log.info({ signal }, 'shutting down');
      resolve();
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  metrics.stop();
  await webhooks?.close();
  await server.close(5000);
  await ctx.close();
  log.info({}, 'stopped');
  return ExitCode.ok;
}
