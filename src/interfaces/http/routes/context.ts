import type { Config } from '../../../config/config.ts';
import type { Client } from '../../../api/client.ts';
import type { RuntimeMetrics } from '../../../runtime/metrics.ts';
import type { Logger } from '../../log.ts';
import type { Auth } from '../auth/guard.ts';
import type { EventStreams } from '../event-stream.ts';
import { routeFor, type Json } from '../route.ts';

/** What every route's handler is given by createApp. */
export interface RouteContext {
  /** Every handler reaches sessions through the public client, as any caller of the library does. */
  client: Client;
  config: Config;
  logger: Logger;
  auth: Auth;
  metrics: RuntimeMetrics;
  streams: EventStreams;
  /** `/readyz` wants a worker heartbeat at most this old. */
  workerStaleMs: number;
  /** Mark the login cookie Secure (the server speaks HTTPS). */
  secureCookies: boolean;
  /** The OpenAPI document (served at `/openapi.json`). */
  document: Json;
}

/** Declares a route of the API: see route.ts. */
export const defineRoute = routeFor<RouteContext>();
