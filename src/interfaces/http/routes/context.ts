import type { Hono } from 'hono';
import type { Config } from '../../../config/config.ts';
import type { Runtime } from '../../../runtime/runtime.ts';
import type { RuntimeMetrics } from '../../../runtime/metrics.ts';
import type { Logger } from '../../log.ts';
import type { Auth } from '../auth/guard.ts';
import type { EventStreams } from '../event-stream.ts';

/** What every route group of the HTTP API is given by createApp. */
export interface RouteContext {
  app: Hono;
  runtime: Runtime;
  config: Config;
  logger: Logger;
  auth: Auth;
  metrics: RuntimeMetrics;
  streams: EventStreams;
  /** `/readyz` wants a worker heartbeat at most this old. */
  workerStaleMs: number;
}
