import { RuntimeMetrics, type MetricsOptions } from '../runtime/metrics.ts';
import { runtimeOf } from './bind.ts';
import type { Client } from './client.ts';

export type { MetricsOptions };

/**
 * Prometheus metrics of the deployment a client talks to (what `sessiond serve` exposes at `/metrics`),
 * refreshed from Redis when scraped or every `start(everyMs)`. Its own module: prom-client is loaded
 * only by those who ask for metrics.
 */
export function createMetrics(client: Client, options: MetricsOptions = {}): RuntimeMetrics {
  return new RuntimeMetrics(runtimeOf(client), options);
}
