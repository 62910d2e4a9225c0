import { exportChart } from '../../../../machines/definition.ts';
import { sessionMachine } from '../../../../machines/session.machine.ts';
import { openApiDocument } from '../openapi.ts';
import { readJson, validate } from '../body.ts';
import { DispatchBody } from '../schemas.ts';
import type { RouteContext } from './context.ts';

/** Health, readiness, metrics, the OpenAPI document, the statechart and the deployment policy. */
export function registerOperationRoutes(ctx: RouteContext): void {
  const { app, runtime, auth, metrics, workerStaleMs } = ctx;
  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  app.get('/readyz', async (c) => {
    const ping = await withTimeout(runtime.ping(), 1000).then(
      (r) => (r === null ? 'Redis did not answer PING within 1 s' : null),
      (error: Error) => `Redis PING failed: ${error.message}`,
    );
    // Without a credential (when one is configured): ready or not, no details.
    if (auth.principalOf(c) === null) {
      const ready = ping === null && (await runtime.workers()).some((w) => Date.now() - w.lastSeen <= workerStaleMs);
      return c.json({ status: ready ? 'ready' : 'unready' }, ready ? 200 : 503);
    }
    if (ping !== null) return c.json({ status: 'unready', reason: ping }, 503);
    const now = Date.now();
    const workers = await runtime.workers();
    const live = workers.filter((w) => now - w.lastSeen <= workerStaleMs);
    if (live.length === 0) {
      const last = Math.max(0, ...workers.map((w) => w.lastSeen));
      const reason = workers.length === 0 ? 'no worker has ever sent a heartbeat' : `no worker heartbeat in the last ${workerStaleMs} ms (last ${now - last} ms ago)`;
      return c.json({ status: 'unready', reason, workers: 0 }, 503);
    }
    // Each live worker's containment: a host without cgroups is said here, not only in its log.
    const containment = live.map((w) => ({ worker: w.id, mode: w.containment?.mode ?? 'sweep', detail: w.containment?.detail ?? 'worker predates containment reports' }));
    // And each one's sandbox, with what its mode cannot stop.
    const sandbox = live.map((w) => ({ worker: w.id, ...(w.sandbox ?? { mode: 'none', detail: 'worker predates sandbox reports', gaps: [], refused: false }) }));
    return c.json({ status: 'ready', workers: live.length, containment, sandbox });
  });
  app.get('/metrics', async (c) => {
    const text = await metrics.render();
    return c.body(text, 200, { 'Content-Type': metrics.contentType });
  });
  app.get('/openapi.json', (c) => c.json(openApiDocument()));
  app.get('/api/chart', (c) => c.json(exportChart(sessionMachine)));
  app.get('/api/deployment-policy', async (c) => c.json(await runtime.resolvedPolicy()));

  // ---- fleet limits and dispatch ------------------------------------------------------------
  app.get('/api/limits', async (c) => c.json(await runtime.limitsView()));
  app.post('/api/dispatch/pause', async (c) => {
    const body = validate(DispatchBody, (await readJson(c)) ?? {});
    return c.json(await runtime.pauseDispatch(body.limit), 200);
  });
  app.post('/api/dispatch/resume', async (c) => {
    const body = validate(DispatchBody, (await readJson(c)) ?? {});
    return c.json(await runtime.resumeDispatch(body.limit), 200);
  });
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([promise, new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), ms)))]).finally(() => clearTimeout(timer));
}
