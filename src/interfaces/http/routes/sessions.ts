import { SESSION_ID_PATTERN } from '../../../runtime/keys.ts';
import type { SessionView } from '../../../runtime/runtime.ts';
import { HttpError, readJson, validate } from '../body.ts';
import { ApprovalBody, CancelBody, CreateSessionBody, DeleteQuery, ListQuery, PromptBody } from '../schemas.ts';
import { callerRequest } from '../auth/caller.ts';
import type { RouteContext } from './context.ts';
import { detail, listItem, sessionOr404, unknown } from './views.ts';

/** Sessions: list, create, read, add a prompt, export, delete, cancel. */
export function registerSessionRoutes(ctx: RouteContext): void {
  const { app, runtime, auth, logger } = ctx;
  app.get('/api/sessions', async (c) => {
    const query = validate(ListQuery, c.req.query());
    // Nothing shown in the listing changed since the caller's copy: 304, without reading a session.
    const etag = `W/"${await runtime.listingVersion()}.${Buffer.from(new URL(c.req.url).search, 'utf8').toString('base64url')}"`;
    if (c.req.header('if-none-match') === etag) return c.body(null, 304, { ETag: etag });
    const page = await runtime.listPage({
      ...(query.state === undefined ? {} : { state: query.state }),
      ...(query.cursor === undefined ? {} : { cursor: query.cursor }),
      limit: query.limit ?? 100,
    });
    const views = await Promise.all(page.sessions.map((s) => runtime.getSession(s.sessionId)));
    return c.json({ sessions: views.filter((v): v is SessionView => v !== null).map(listItem), next: page.next }, 200, { ETag: etag });
  });
  app.post('/api/sessions', async (c) => {
    const body = validate(CreateSessionBody, await readJson(c));
    // A retry policy is the admin's to set, also when it comes with a new session.
    if (body.retryPolicy !== undefined && auth.principalOf(c)?.scope !== 'admin') {
      throw new HttpError(403, 'setting a retry policy needs an admin token', [{ field: 'retryPolicy', message: 'needs scope admin' }]);
    }
    // Issue 25: the tenant and the highest priority are the credential's, the session cap its token's (auth/caller.ts).
    const { request, how } = callerRequest(auth, auth.principalOf(c), body);
    const { sessionId, turn, created } = await runtime.enqueue(request, how);
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
    const { request } = callerRequest(auth, auth.principalOf(c), body);
    const { sessionId, turn } = await runtime.enqueue({ ...request, sessionId: id }, { mustExist: true });
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
    const principal = auth.principalOf(c);
    const actor = principal === null ? 'http:anonymous' : `http:${principal.name ?? principal.via}(${principal.scope})`;
    const result = await runtime.deleteSession(id, { force: query.force === true, actor });
    logger.info({ audit: 'session.delete', sessionId: id, force: query.force === true, deleted: result.deleted, cancelled: result.cancelled }, 'session deleted');
    return c.json(result, 200);
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
  app.post('/api/sessions/:id/cancel', async (c) => {
    const id = c.req.param('id');
    const body = validate(CancelBody, (await readJson(c)) ?? {});
    if (!SESSION_ID_PATTERN.test(id)) throw unknown(id);
    const { delivered } = await runtime.cancel(id, body.reason);
    return c.json({ sessionId: id, delivered }, 202);
  });
}
