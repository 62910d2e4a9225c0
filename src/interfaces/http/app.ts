import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { Config } from '../../config/config.ts';
import { HTTP_DEFAULTS } from '../../config/defaults.ts';
import { hasErrorCode } from '../../errors.ts';
import type { Client } from '../../api/client.ts';
import { createMetrics } from '../../api/metrics.ts';
import type { RuntimeMetrics } from '../../runtime/metrics.ts';
import type { Logger } from '../log.ts';
import { registerDashboard } from '../web/routes.ts';
import { mountBullBoard } from '../web/bull-board.ts';
import { Auth, BULL_BOARD_ADMIN_PATH, BULL_BOARD_PATH } from './auth/guard.ts';
import { HttpError } from './body.ts';
import { EventStreams } from './event-stream.ts';
import { openApiDocument } from './openapi.ts';
import { mountRoutes } from './route.ts';
import type { RouteContext } from './routes/context.ts';
import { ALL_ROUTES, API_ROUTES } from './routes/index.ts';
import { workerStaleMs } from '../../runtime/worker-liveness.ts';

export interface AppOptions {
  /** The deployment's client (createClient): every route goes through it. */
  client: Client;
  config: Config;
  logger: Logger;
  /** Aborting it ends every live event stream (server shutdown). */
  signal?: AbortSignal;
  /** Defaults to metrics of `client` with a 3 s cache. */
  metrics?: RuntimeMetrics;
  /** SSE keep-alive comment interval. Default 15 s. */
  keepAliveMs?: number;
  /** `/readyz` wants a worker heartbeat at most this old. Default 3 × config.worker.heartbeat (at least 5 s). */
  workerStaleMs?: number;
  /** Serve the dashboard at `/` (default true). */
  dashboard?: boolean;
  /** Mount Bull Board at `/queues` (default true). */
  bullBoard?: boolean;
  /** Mark the login cookie Secure (the server speaks HTTPS). */
  secureCookies?: boolean;
}

/**
 * The HTTP API (and, unless disabled, the dashboard and Bull Board). Handlers
 * only translate HTTP to calls of the public client and back: no business logic here. Each
 * route is declared whole in one place (route.ts: path, schemas, scope,
 * handler), in groups by noun under routes/ (auth/routes.ts has login and
 * stream tickets; web/routes.ts the dashboard); the OpenAPI document is
 * assembled from them.
 *
 * Auth (auth/guard.ts): with a token configured, every route but the public
 * ones needs a credential whose scope covers it (declared by each route). Bound to anything but loopback, a token is
 * required (createApp throws without one).
 */
export function createApp(options: AppOptions): Hono {
  const { client, config, logger } = options;
  const document = openApiDocument();
  const auth = new Auth({ http: config.http, caller: config.caller, logger, routes: ALL_ROUTES });
  const metrics = options.metrics ?? createMetrics(client, { workerStaleMs: staleMs(options) });
  const streams = new EventStreams({
    client,
    logger,
    signal: options.signal,
    keepAliveMs: options.keepAliveMs ?? HTTP_DEFAULTS.keepAliveMs,
    maxStreams: config.http.maxStreams,
    idleMs: config.http.streamIdleTimeout,
    tokenCap: (principal) => {
      const caps = auth.capsOf(principal);
      return caps === null || principal?.name == null ? null : { name: principal.name, maxStreams: caps.maxStreams };
    },
  });
  const app = new Hono();

  app.use('*', async (c, next) => {
    const started = performance.now();
    await next();
    // One line per request; never bodies, query strings or headers (tokens).
    logger.info(
      {
        method: c.req.method,
        path: c.req.path,
        status: c.res.status,
        ms: Math.round((performance.now() - started) * 10) / 10,
      },
      'request',
    );
  });
  app.use('*', auth.middleware());
  app.use(
    '*',
    bodyLimit({
      maxSize: config.http.bodyLimitBytes,
      onError: (c) => c.json({ error: `request body too large: at most ${config.http.bodyLimitBytes} bytes` }, 413),
    }),
  );

  app.onError((error, c) => {
    if (error instanceof HttpError)
      return c.json(
        { error: error.message, ...(error.issues === undefined ? {} : { issues: error.issues }) },
        error.status,
      );
    // sessiond's errors carry their `code`: the library's (`hasErrorCode`) and the API's are the same.
    if (hasErrorCode(error, 'invalid_input'))
      return c.json({ error: 'invalid request', code: error.code, issues: error.issues }, 400);
    if (hasErrorCode(error, 'not_found')) return c.json({ error: error.message, code: error.code }, 404);
    if (hasErrorCode(error, 'conflict')) return c.json({ error: error.message, code: error.code }, 409);
    if (hasErrorCode(error, 'quota_exceeded'))
      return c.json({ error: error.message, code: error.code, limit: error.limit, max: error.max }, error.status);
    logger.error({ method: c.req.method, path: c.req.path, error: error.message }, 'request failed');
    return c.json({ error: 'internal error' }, 500);
  });
  app.notFound((c) => c.json({ error: `no route for ${c.req.method} ${c.req.path}` }, 404));

  const routes: RouteContext = {
    client,
    config,
    logger,
    auth,
    metrics,
    streams,
    workerStaleMs: staleMs(options),
    secureCookies: options.secureCookies === true,
    document,
  };
  mountRoutes(app, API_ROUTES, routes);

  // ---- dashboard and Bull Board -----------------------------------------------------------
  if (options.dashboard !== false) registerDashboard(app, { tokenRequired: auth.required });
  // With tokens, Bull Board is read-only at /queues (read) and has its actions at /queues-admin (admin only).
  if (options.bullBoard !== false) {
    mountBullBoard(app, client.deployment.bullQueue(), { basePath: BULL_BOARD_PATH, readOnly: auth.required });
    if (auth.required)
      mountBullBoard(app, client.deployment.bullQueue(), { basePath: BULL_BOARD_ADMIN_PATH, readOnly: false });
  }

  return app;
}

function staleMs(options: AppOptions): number {
  return options.workerStaleMs ?? workerStaleMs(options.config.worker.heartbeat);
}
