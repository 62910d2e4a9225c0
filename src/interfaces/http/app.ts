import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { exportChart } from '../../../machines/definition.ts';
import { sessionMachine } from '../../../machines/session.machine.ts';
import type { Config } from '../../config/config.ts';
import { awaitingApproval, summarize } from '../../runtime/inspect.ts';
import { SESSION_ID_PATTERN } from '../../runtime/keys.ts';
import { RuntimeMetrics } from '../../runtime/metrics.ts';
import { InputError, NotFoundError, type Runtime, type SessionView } from '../../runtime/runtime.ts';
import { ConflictError, QuotaError } from '../../runtime/lifecycle/errors.ts';
import type { Logger } from '../log.ts';
import { registerDashboard } from '../web/routes.ts';
import { mountBullBoard } from '../web/bull-board.ts';
import { Auth, BULL_BOARD_ADMIN_PATH, BULL_BOARD_PATH } from './auth/guard.ts';
import { registerAuthRoutes } from './auth/routes.ts';
import { HttpError, readJson, validate } from './body.ts';
import { EventStreams } from './event-stream.ts';
import { openApiDocument } from './openapi.ts';
import { ApprovalBody, CancelBody, CreateSessionBody, DeleteQuery, EventsQuery, ListQuery, MessagesQuery, PromptBody } from './schemas.ts';

export interface AppOptions {
  runtime: Runtime;
  config: Config;
  logger: Logger;
  /** Aborting it ends every live event stream (server shutdown). */
  signal?: AbortSignal;
  /** Defaults to metrics of `runtime` with a 3 s cache. */
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
 * only translate HTTP to runtime calls and back: no business logic here.
 *
 * Auth (auth/guard.ts): with a token configured, every route but the public
 * ones needs a credential whose scope covers it (declared per operation in the
 * OpenAPI document). Bound to anything but loopback, a token is required
 * (createApp throws without one).
 */
export function createApp(options: AppOptions): Hono {
  const { runtime, config, logger } = options;
  const auth = new Auth({ http: config.http, logger, document: openApiDocument() });
  const metrics = options.metrics ?? new RuntimeMetrics(runtime, { workerStaleMs: staleMs(options) });
  const streams = new EventStreams({ runtime, logger, signal: options.signal, keepAliveMs: options.keepAliveMs ?? 15_000, maxStreams: config.http.maxStreams, idleMs: config.http.streamIdleTimeout });
  const app = new Hono();

  app.use('*', async (c, next) => {
    const started = performance.now();
    await next();
    // One line per request; never bodies, query strings or headers (tokens).
    logger.info({ method: c.req.method, path: c.req.path, status: c.res.status, ms: Math.round((performance.now() - started) * 10) / 10 }, 'request');
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
    if (error instanceof HttpError) return c.json({ error: error.message, ...(error.issues === undefined ? {} : { issues: error.issues }) }, error.status);
    if (error instanceof InputError) return c.json({ error: 'invalid request', issues: error.issues }, 400);
    if (error instanceof NotFoundError) return c.json({ error: error.message }, 404);
    if (error instanceof ConflictError) return c.json({ error: error.message }, 409);
    if (error instanceof QuotaError) return c.json({ error: error.message, limit: error.limit, max: error.max }, error.status);
    logger.error({ method: c.req.method, path: c.req.path, error: error.message }, 'request failed');
    return c.json({ error: 'internal error' }, 500);
  });
  app.notFound((c) => c.json({ error: `no route for ${c.req.method} ${c.req.path}` }, 404));

  // ---- operations -------------------------------------------------------------------------
  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  app.get('/readyz', async (c) => {
    const ping = await withTimeout(runtime.redis.ping(), 1000).then(
      (r) => (r === null ? 'Redis did not answer PING within 1 s' : null),
      (error: Error) => `Redis PING failed: ${error.message}`,
    );
    // Without a credential (when one is configured): ready or not, no details.
    if (auth.principalOf(c) === null) {
      const ready = ping === null && (await runtime.workers()).some((w) => Date.now() - w.lastSeen <= staleMs(options));
      return c.json({ status: ready ? 'ready' : 'unready' }, ready ? 200 : 503);
    }
    if (ping !== null) return c.json({ status: 'unready', reason: ping }, 503);
    const now = Date.now();
    const workers = await runtime.workers();
    const live = workers.filter((w) => now - w.lastSeen <= staleMs(options));
    if (live.length === 0) {
      const last = Math.max(0, ...workers.map((w) => w.lastSeen));
      const reason = workers.length === 0 ? 'no worker has ever sent a heartbeat' : `no worker heartbeat in the last ${staleMs(options)} ms (last ${now - last} ms ago)`;
      return c.json({ status: 'unready', reason, workers: 0 }, 503);
    }
    // Each live worker's containment: a host without cgroups is said here, not only in its log.
    const containment = live.map((w) => ({ worker: w.id, mode: w.containment?.mode ?? 'sweep', detail: w.containment?.detail ?? 'worker predates containment reports' }));
    return c.json({ status: 'ready', workers: live.length, containment });
  });
  app.get('/metrics', async (c) => {
    const text = await metrics.render();
    return c.body(text, 200, { 'Content-Type': metrics.contentType });
  });
  app.get('/openapi.json', (c) => c.json(openApiDocument()));
  app.get('/api/chart', (c) => c.json(exportChart(sessionMachine)));
  app.get('/api/deployment-policy', (c) => c.json(runtime.deploymentPolicy));

  // ---- sessions ---------------------------------------------------------------------------
  app.get('/api/sessions', async (c) => {
    const query = validate(ListQuery, c.req.query());
    // Nothing shown in the listing changed since the caller's copy: 304, without reading a session.
    const etag = `W/"${await runtime.listingVersion()}.${Buffer.from(new URL(c.req.url).search, 'utf8').toString('base64url')}"`;
    if (c.req.header('if-none-match') === etag) return c.body(null, 304, { ETag: etag });
    const page = await runtime.listPage({ ...(query.state === undefined ? {} : { state: query.state }), ...(query.cursor === undefined ? {} : { cursor: query.cursor }), limit: query.limit ?? 100 });
    const views = await Promise.all(page.sessions.map((s) => runtime.getSession(s.sessionId)));
    return c.json({ sessions: views.filter((v): v is SessionView => v !== null).map(listItem), next: page.next }, 200, { ETag: etag });
  });
  app.post('/api/sessions', async (c) => {
    const body = validate(CreateSessionBody, await readJson(c));
    // A retry policy is the admin's to set, also when it comes with a new session.
    if (body.retryPolicy !== undefined && auth.principalOf(c)?.scope !== 'admin') {
      throw new HttpError(403, 'setting a retry policy needs an admin token', [{ field: 'retryPolicy', message: 'needs scope admin' }]);
    }
    const { sessionId, turn, created } = await runtime.enqueue(body);
    return c.json({ sessionId, turn, created }, created ? 201 : 202);
  });
  app.get('/api/sessions/:id', async (c) => {
    const view = await sessionOr404(runtime, c.req.param('id'));
    return c.json(detail(view));
  });
  app.post('/api/sessions/:id/prompts', async (c) => {
    const id = c.req.param('id');
    const body = validate(PromptBody, await readJson(c));
    await sessionOr404(runtime, id);
    const { sessionId, turn } = await runtime.enqueue({ ...body, sessionId: id }, { mustExist: true });
    return c.json({ sessionId, turn }, 202);
  });
  app.get('/api/sessions/:id/export', async (c) => {
    const id = c.req.param('id');
    if (!SESSION_ID_PATTERN.test(id)) throw unknown(id);
    const archive = await runtime.exportSession(id);
    return c.body(archive, 200, { 'Content-Type': 'application/x-ndjson; charset=utf-8', 'Content-Disposition': `attachment; filename="${id}.sessiond.jsonl"` });
  });
  // Deletes the session fleet-wide (a running turn is cancelled first with ?force=true). To be admin-scoped with scoped tokens.
  app.delete('/api/sessions/:id', async (c) => {
    const id = c.req.param('id');
    const query = validate(DeleteQuery, c.req.query());
    if (!SESSION_ID_PATTERN.test(id)) throw unknown(id);
    const result = await runtime.deleteSession(id, { force: query.force === true });
    logger.info({ audit: 'session.delete', sessionId: id, force: query.force === true, deleted: result.deleted, cancelled: result.cancelled }, 'session deleted');
    return c.json(result, 200);
  });
  app.post('/api/sessions/:id/cancel', async (c) => {
    const id = c.req.param('id');
    const body = validate(CancelBody, (await readJson(c)) ?? {});
    if (!SESSION_ID_PATTERN.test(id)) throw unknown(id);
    const { delivered } = await runtime.cancel(id, body.reason);
    return c.json({ sessionId: id, delivered }, 202);
  });

  app.post('/api/sessions/:id/approvals/:requestId', async (c) => {
    const id = c.req.param('id');
    const body = validate(ApprovalBody, await readJson(c));
    if (!SESSION_ID_PATTERN.test(id)) throw unknown(id);
    const principal = auth.principalOf(c);
    const by = `http:${principal?.name ?? principal?.via ?? 'open'}`;
    const result = await runtime.decideApproval(id, c.req.param('requestId'), body.decision, by, body.option, body.reason);
    logger.info({ audit: 'approval.decide', sessionId: id, requestId: result.requestId, outcome: result.outcome, by }, 'approval decided');
    return c.json(result, 200);
  });

  // ---- messages ---------------------------------------------------------------------------
  app.get('/api/sessions/:id/messages', async (c) => {
    const id = c.req.param('id');
    const query = validate(MessagesQuery, c.req.query());
    const view = await sessionOr404(runtime, id);
    const from = query.from ?? 1;
    const messages = await runtime.readMessages(id, from, query.limit ?? 500);
    const last = messages.at(-1);
    return c.json({ sessionId: id, from, messages, nextFrom: last === undefined ? from : last.seq + 1, lastSeq: view.lastSeq });
  });
  app.get('/api/sessions/:id/events', async (c) => {
    const id = c.req.param('id');
    const query = validate(EventsQuery, c.req.query());
    await sessionOr404(runtime, id);
    const lastEventId = c.req.header('last-event-id');
    let from = query.from ?? 1;
    if (lastEventId !== undefined && lastEventId.trim() !== '') {
      if (!/^\d{1,16}$/.test(lastEventId.trim()) || !Number.isSafeInteger(Number(lastEventId.trim()))) throw new HttpError(400, 'invalid Last-Event-ID', [{ field: 'Last-Event-ID', message: 'must be a message seq (an integer)' }]);
      from = Number(lastEventId.trim()) + 1;
    }
    return streams.open(c, id, from, auth.principalOf(c));
  });

  // ---- retry policy -----------------------------------------------------------------------
  app.get('/api/retry-policy', async (c) => c.json(await runtime.getPolicy()));
  app.put('/api/retry-policy', async (c) => {
    const result = await runtime.setPolicy(await readJson(c));
    if (!result.ok) throw policyError(result.errors);
    return c.json({ policy: result.policy, source: 'global' });
  });
  app.delete('/api/retry-policy', async (c) => c.json({ policy: await runtime.resetPolicy(), source: 'default' }));
  app.get('/api/sessions/:id/retry-policy', async (c) => {
    const id = c.req.param('id');
    if (!SESSION_ID_PATTERN.test(id)) throw unknown(id);
    return c.json(await runtime.getPolicy(id));
  });
  app.put('/api/sessions/:id/retry-policy', async (c) => {
    const id = c.req.param('id');
    const patch = await readJson(c);
    if (!SESSION_ID_PATTERN.test(id)) throw unknown(id);
    const result = await runtime.setPolicy(patch, id);
    if (!result.ok) throw policyError(result.errors);
    return c.json({ policy: result.policy, source: 'session' });
  });
  app.delete('/api/sessions/:id/retry-policy', async (c) => {
    const id = c.req.param('id');
    if (!SESSION_ID_PATTERN.test(id)) throw unknown(id);
    const policy = await runtime.resetPolicy(id);
    return c.json({ policy, source: (await runtime.getPolicy(id)).source });
  });

  // ---- auth: login cookie, stream tickets -------------------------------------------------
  registerAuthRoutes(app, auth, { secure: options.secureCookies === true, sessionExists: async (id) => SESSION_ID_PATTERN.test(id) && (await runtime.getSession(id)) !== null });

  // ---- dashboard and Bull Board -----------------------------------------------------------
  if (options.dashboard !== false) registerDashboard(app, { tokenRequired: auth.required });
  // With tokens, Bull Board is read-only at /queues (read) and has its actions at /queues-admin (admin only).
  if (options.bullBoard !== false) {
    mountBullBoard(app, runtime.queue.queue, { basePath: BULL_BOARD_PATH, readOnly: auth.required });
    if (auth.required) mountBullBoard(app, runtime.queue.queue, { basePath: BULL_BOARD_ADMIN_PATH, readOnly: false });
  }

  return app;
}

function staleMs(options: AppOptions): number {
  return options.workerStaleMs ?? Math.max(5000, 3 * options.config.worker.heartbeat);
}

function unknown(id: string): HttpError {
  return new HttpError(404, `unknown session "${id}"`);
}

async function sessionOr404(runtime: Runtime, id: string): Promise<SessionView> {
  const view = SESSION_ID_PATTERN.test(id) ? await runtime.getSession(id) : null;
  if (view === null) throw unknown(id);
  return view;
}

function policyError(errors: Array<{ field: string; message: string }>): HttpError {
  return new HttpError(400, 'retry policy not changed', errors.map((e) => ({ field: e.field, message: e.message })));
}

/** `GET /api/sessions/:id`: the operator's summary plus the raw machine context. */
function detail(view: SessionView) {
  return {
    ...summarize(view),
    options: view.options,
    queued: view.queued,
    cancelRequested: view.cancelRequested,
    context: view.context,
  };
}

/** One row of `GET /api/sessions`. */
function listItem(view: SessionView) {
  const s = summarize(view);
  return {
    sessionId: s.sessionId,
    state: s.state,
    agent: s.agent,
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
    turn: s.turn === null ? null : { index: s.turn.index, status: s.turn.status, attempts: s.turn.attempts.length, prompt: s.turn.prompt === null ? null : s.turn.prompt.slice(0, 200) },
    ...(s.nextRetryAt === undefined ? {} : { nextRetryAt: s.nextRetryAt }),
    ...(s.lastFailure === undefined ? {} : { lastFailure: { category: s.lastFailure.category, at: s.lastFailure.at } }),
    queuedPrompts: s.queuedPrompts,
    ...(awaitingApproval(s) ? { awaitingApproval: true } : {}),
  };
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([promise, new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), ms)))]).finally(() => clearTimeout(timer));
}
