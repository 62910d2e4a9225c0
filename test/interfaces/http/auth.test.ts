import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { seedApproval } from '../../support/approvals.ts';
import { describe, expect, it } from 'vitest';
import { loadConfig, type Config } from '../../../src/config/config.ts';
import { createApp } from '../../../src/interfaces/http/app.ts';
import { startServer } from '../../../src/interfaces/http/server.ts';
import { ROUTE_SCOPES, SCOPE_KEY, type RouteScope } from '../../../src/interfaces/http/auth/route-scopes.ts';
import { openApiDocument, REQUEST_EXAMPLES } from '../../../src/interfaces/http/openapi.ts';
import type { Redis } from 'ioredis';
import { useRuntimeSuite, type Harness } from '../../support/runtime.ts';
import { internals } from '../../../src/runtime/internals.ts';
import { clientOver } from '../../../src/api/bind.ts';

/**
 * Who may read and who may act: every operation of the OpenAPI document (so a
 * route added later is covered by itself) × every kind of credential × the
 * bindings, each cell checked for its status; a refused cell must leave Redis
 * exactly as it was.
 */

const TOKENS = {
  read: 'read-token-0123456789abcdef',
  write: 'write-token-0123456789abcdef',
  admin: 'admin-token-0123456789abcdef',
} as const;
const sha = (t: string) => createHash('sha256').update(t).digest('hex');
const tokenList = Object.entries(TOKENS).map(([scope, token]) => ({ name: `${scope}-bot`, scope, sha256: sha(token) }));

let h: Harness;
const logLines: string[] = [];
useRuntimeSuite('http-auth', {}, (s) => {
  ({ h } = s);
});

function logger() {
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      logLines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      callback();
    },
  });
  return pino({ level: 'info' }, stream);
}

function configFor(http: Record<string, unknown>): Config {
  const base = loadConfig({ prefix: h.prefix }, {});
  return { ...base, http: { ...base.http, streamTicketTtl: 1000, ...http } as Config['http'] };
}

type App = ReturnType<typeof createApp>;
const HOST = '127.0.0.1:7420';

async function send(
  app: App,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: unknown,
): Promise<Response> {
  const init: RequestInit = {
    method,
    headers: { host: HOST, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
  };
  if (body !== undefined) init.body = JSON.stringify(body);
  const r = await app.request(`http://${HOST}${path}`, init);
  return r;
}

/** Every key of the test's Redis with its serialized value: equal fingerprints = nothing written. */
async function fingerprint(redis: Redis): Promise<string> {
  const keys = (await redis.keys('*')).sort();
  const pipeline = redis.pipeline();
  for (const k of keys) pipeline.dumpBuffer(k);
  const values = (await pipeline.exec()) ?? [];
  return createHash('sha256')
    .update(keys.map((k, i) => `${k}=${(values[i]?.[1] as Buffer | null)?.toString('base64') ?? ''}`).join('\n'))
    .digest('hex');
}

/** Makes the session's (queued) prompt a failed turn 1, as a worker leaves it: its snapshot says so, its inbox is empty. */
async function failTheTurn(sessionId: string): Promise<void> {
  const turn = {
    index: 1,
    promptId: 'p',
    text: 'cell',
    options: {},
    status: 'failed',
    failureReason: 'not_retryable',
    cancelReason: null,
    startedAt: 1,
    endedAt: 2,
    attempts: [],
  };
  const context = {
    sessionId,
    agentSessionId: null,
    agentSessionResumable: false,
    turnIndex: 1,
    attempt: 1,
    turn,
    nextRetryAt: null,
    lastFailure: null,
    mailbox: [],
    finishedPromptIds: ['p'],
  };
  await internals(h.runtime).redis.set(
    internals(h.runtime).store.key(sessionId, 'snapshot'),
    JSON.stringify({ version: 1, snapshot: { status: 'active', value: 'failed', context } }),
  );
  await internals(h.runtime).redis.del(internals(h.runtime).store.key(sessionId, 'inbox'));
}

/** Makes the session's (queued) prompt a turn 1 parked at a quota wall an hour away, as a worker leaves it. */
async function parkTheTurn(sessionId: string): Promise<void> {
  const until = Date.now() + 3_600_000;
  const attempt = {
    attempt: 1,
    startedAt: 1,
    endedAt: 2,
    outcome: 'failed',
    category: 'rate_limited',
    errorText: '429',
    delayMs: 3_600_000,
    promptRecorded: false,
    quotaWall: 'free',
  };
  const turn = {
    index: 1,
    promptId: 'p',
    text: 'cell',
    options: {},
    status: 'parked',
    failureReason: null,
    cancelReason: null,
    startedAt: 1,
    endedAt: null,
    attempts: [attempt],
    freeWalls: 1,
    quotaWall: { until, since: 2, free: true, category: 'rate_limited' },
  };
  const context = {
    sessionId,
    agentSessionId: null,
    agentSessionResumable: false,
    turnIndex: 1,
    attempt: 1,
    turn,
    nextRetryAt: until,
    lastFailure: null,
    mailbox: [],
    finishedPromptIds: [],
  };
  await internals(h.runtime).redis.set(
    internals(h.runtime).store.key(sessionId, 'snapshot'),
    JSON.stringify({ version: 1, snapshot: { status: 'active', value: 'parked', context } }),
  );
  await internals(h.runtime).redis.hset(internals(h.runtime).store.key(sessionId, 'meta'), 'state', 'parked');
  await internals(h.runtime).redis.del(internals(h.runtime).store.key(sessionId, 'inbox'));
}

interface Operation {
  method: string;
  path: string;
  operationId: string;
  scope: RouteScope;
  successCodes: number[];
}

const doc = openApiDocument() as { paths: Record<string, Record<string, Record<string, unknown>>> };
const operations: Operation[] = Object.entries(doc.paths).flatMap(([path, ops]) =>
  Object.entries(ops).map(([method, op]) => ({
    method: method.toUpperCase(),
    path,
    operationId: String(op.operationId),
    scope: op[SCOPE_KEY] as RouteScope,
    successCodes: Object.keys((op.responses ?? {}) as Record<string, unknown>)
      .filter((code) => /^[23]\d\d$/.test(code))
      .map(Number),
  })),
);

const RANK: Record<string, number> = { read: 1, write: 2, admin: 3 };

/** The routes of a workspace session's turns: a session without a workspace is refused with 409 (test/runtime/workspaces-turns.test.ts serves them one). */
const WORKSPACE_OPERATIONS = new Set(['undoTurn', 'forkSession', 'turnDiff']);

/** A body the API accepts for the operation (its first documented example; login: the admin token). */
function bodyFor(op: Operation): unknown {
  if (op.operationId === 'login') return { token: TOKENS.admin };
  const examples = REQUEST_EXAMPLES[op.operationId];
  if (examples === undefined) return undefined;
  return Object.values(examples)[0]?.value;
}

describe('every operation declares its scope', () => {
  it('each operation of the OpenAPI document has x-sessiond-scope, one of public, read, write, admin', () => {
    const missing = operations.filter((op) => !ROUTE_SCOPES.includes(op.scope)).map((op) => `${op.method} ${op.path}`);
    expect(missing, 'operations without a declared scope').toEqual([]);
    // What each scope may do (issue 12): read = every GET, the stream, /metrics; write = + create, prompt, cancel; admin = + policies, deletion, queue.
    const want: Record<string, RouteScope> = {
      'GET /healthz': 'public',
      'GET /readyz': 'public',
      'GET /metrics': 'read',
      'GET /openapi.json': 'read',
      'GET /api/chart': 'read',
      'GET /api/sessions': 'read',
      'GET /api/sessions/{id}': 'read',
      'GET /api/sessions/{id}/messages': 'read',
      'GET /api/sessions/{id}/events': 'read',
      'GET /api/retry-policy': 'read',
      'GET /api/sessions/{id}/retry-policy': 'read',
      'GET /api/whoami': 'read',
      'POST /api/sessions/{id}/stream-ticket': 'read',
      'POST /api/sessions': 'write',
      'POST /api/sessions/{id}/prompts': 'write',
      'POST /api/sessions/{id}/cancel': 'write',
      'POST /api/sessions/{id}/retry': 'write',
      'POST /api/sessions/{id}/resume': 'write',
      'POST /api/sessions/{id}/undo': 'write',
      'POST /api/sessions/{id}/fork': 'write',
      'GET /api/sessions/{id}/diff': 'read',
      'GET /api/sessions/{id}/queue': 'read',
      'DELETE /api/sessions/{id}/queue/{promptId}': 'write',
      'POST /api/bulk/cancel': 'admin',
      'POST /api/sessions/{id}/approvals/{requestId}': 'write',
      'PUT /api/retry-policy': 'admin',
      'DELETE /api/retry-policy': 'admin',
      'PUT /api/sessions/{id}/retry-policy': 'admin',
      'DELETE /api/sessions/{id}/retry-policy': 'admin',
      'DELETE /api/sessions/{id}': 'admin',
      'GET /api/deployment-policy': 'read',
      'POST /api/login': 'public',
      'POST /api/logout': 'public',
    };
    for (const op of operations) {
      const key = `${op.method} ${op.path}`;
      if (want[key] !== undefined) expect(op.scope, key).toBe(want[key]);
      else if (op.method !== 'GET')
        expect(op.scope, `${key}: a new mutation is write or admin`).not.toMatch(/^(public|read)$/);
    }
    // Only the dashboard's shell, its static files, health, readiness, login and logout are public.
    expect(
      operations
        .filter((o) => o.scope === 'public')
        .map((o) => o.operationId)
        .sort(),
    ).toEqual([
      'dashboard',
      'dashboardLimits',
      'dashboardPolicy',
      'dashboardSchedules',
      'dashboardScript',
      'dashboardSession',
      'dashboardStyle',
      'dashboardWebhooks',
      'health',
      'login',
      'logout',
      'ready',
    ]);
  });
});

type Credential = 'none' | 'wrong' | 'expiredTicket' | 'ticket' | 'read' | 'write' | 'admin' | 'cookie-write';
const CREDENTIALS: Credential[] = [
  'none',
  'wrong',
  'expiredTicket',
  'ticket',
  'read',
  'write',
  'admin',
  'cookie-write',
];

/** What a cell should answer: allowed (a documented 2xx/3xx) or refused with 401/403. */
function expected(op: Operation, cred: Credential, binding: 'open' | 'tokens'): 'allowed' | 401 | 403 {
  if (binding === 'open' || op.scope === 'public') return 'allowed';
  if (cred === 'none' || cred === 'wrong' || cred === 'expiredTicket') return 401;
  if (cred === 'ticket') return op.operationId === 'streamEvents' ? 'allowed' : 401;
  const have = cred === 'cookie-write' ? 'write' : cred;
  return RANK[have]! >= RANK[op.scope]! ? 'allowed' : 403;
}

async function runMatrix(app: App, binding: 'open' | 'tokens'): Promise<string[]> {
  const failures: string[] = [];
  const login = await send(app, 'POST', '/api/login', {}, { token: TOKENS.write });
  const cookie = binding === 'tokens' ? ((login.headers.get('set-cookie') ?? '').split(';')[0] ?? '') : '';
  const stale = await h.runtime.enqueue({ prompt: 'for a stale ticket' });
  const staleTicket =
    binding === 'tokens'
      ? (
          (await (
            await send(app, 'POST', `/api/sessions/${stale.sessionId}/stream-ticket`, {
              authorization: `Bearer ${TOKENS.read}`,
            })
          ).json()) as { ticket: string }
        ).ticket
      : 'x';
  await new Promise((resolve) => setTimeout(resolve, 1100)); // the stream ticket TTL is 1 s
  for (const op of operations) {
    for (const cred of CREDENTIALS) {
      // A fresh session per cell: a mutation (or a deletion) of one cell cannot change the next.
      const { sessionId } = await h.runtime.enqueue({ prompt: `cell ${op.operationId} ${cred}` });
      let path = op.path.replace('{id}', sessionId).replace('{module}', 'app.js');
      // An approval needs a request waiting in the cell's session (as a worker's gate stores it).
      if (op.path.includes('{requestId}')) path = path.replace('{requestId}', await seedApproval(h.runtime, sessionId));
      // The cell's session is queued (no worker here): only a forced delete removes it.
      if (op.operationId === 'deleteSession') path += '?force=true';
      // A retry needs a failed last turn: the cell's session gets one, as a worker would leave it.
      if (op.operationId === 'retryTurn') await failTheTurn(sessionId);
      // A resume needs a session parked at a quota wall.
      if (op.operationId === 'resumeParked') await parkTheTurn(sessionId);
      // A bulk cancel needs its filter; a dry run, so that it leaves the other cells' sessions alone.
      if (op.operationId === 'cancelMatching') path += '?state=queued&dryRun=true';
      // A schedule of its own per cell (a caller of its own: the per-caller limit stays far).
      if (op.path.includes('{schedule}'))
        path = path.replace(
          '{schedule}',
          (await h.runtime.addSchedule({ every: '1h', new: true, prompt: 'cell' }, { caller: `cell-${sessionId}` })).id,
        );
      // The cell's session has one queued prompt: its id goes in the path.
      if (op.operationId === 'removeQueuedPrompt')
        path = path.replace('{promptId}', (await h.runtime.queuedPrompts(sessionId))[0]?.id ?? 'none');
      const headers: Record<string, string> = {};
      if (cred === 'wrong') headers.authorization = 'Bearer wrong-token-0123456789abcdef';
      if (cred === 'read' || cred === 'write' || cred === 'admin') headers.authorization = `Bearer ${TOKENS[cred]}`;
      if (cred === 'cookie-write') {
        // A login of its own per cell: the logout cell revokes the cookie it is sent with.
        const fresh = binding === 'tokens' ? await send(app, 'POST', '/api/login', {}, { token: TOKENS.write }) : null;
        headers.cookie = fresh === null ? cookie : ((fresh.headers.get('set-cookie') ?? '').split(';')[0] ?? '');
        headers.origin = `http://${HOST}`;
      }
      if (cred === 'expiredTicket')
        path += `${path.includes('?') ? '&' : '?'}ticket=${encodeURIComponent(staleTicket)}`;
      if (cred === 'ticket' && binding === 'tokens') {
        const issued = (await (
          await send(app, 'POST', `/api/sessions/${sessionId}/stream-ticket`, {
            authorization: `Bearer ${TOKENS.read}`,
          })
        ).json()) as { ticket: string };
        path += `?ticket=${encodeURIComponent(issued.ticket)}`;
      }
      const want = expected(op, cred, binding);
      const before = want === 'allowed' ? '' : await fingerprint(internals(h.runtime).redis);
      const r = await send(app, op.method, path, headers, bodyFor(op));
      const cell = `${binding} ${op.method} ${op.path} [${cred}]`;
      let text = '';
      if (op.operationId === 'streamEvents' && r.status === 200) await r.body?.cancel();
      else text = await r.text();
      if (want === 'allowed') {
        // The cell's session has no workspace (no worker runs it): past the guard, the workspace routes say so.
        const noWorkspace =
          WORKSPACE_OPERATIONS.has(op.operationId) && r.status === 409 && /has no workspace/.test(text);
        if (!op.successCodes.includes(r.status) && !noWorkspace && !(op.operationId === 'ready' && r.status === 503))
          failures.push(`${cell}: ${r.status}, wanted one of ${op.successCodes.join('/')}`);
      } else {
        if (r.status !== want) failures.push(`${cell}: ${r.status}, wanted ${want}`);
        else if ((await fingerprint(internals(h.runtime).redis)) !== before)
          failures.push(`${cell}: refused, but Redis changed`);
      }
    }
  }
  return failures;
}

describe('route × scope matrix (generated from the OpenAPI document)', () => {
  it('loopback with tokens: no token, a wrong one and an expired ticket are 401; each scope reaches what it covers and gets 403 above it; refusals write nothing', async () => {
    const app = createApp({
      client: clientOver(h.runtime),
      config: configFor({ host: '127.0.0.1', tokens: tokenList }),
      logger: logger(),
      bullBoard: false,
    });
    expect(await runMatrix(app, 'tokens')).toEqual([]);
  }, 120_000);

  it('a non-loopback bind (0.0.0.0) with tokens: the same matrix', async () => {
    const app = createApp({
      client: clientOver(h.runtime),
      config: configFor({ host: '0.0.0.0', tokens: tokenList }),
      logger: logger(),
      bullBoard: false,
    });
    expect(await runMatrix(app, 'tokens')).toEqual([]);
  }, 120_000);

  it('loopback without any token: every route is open, as before', async () => {
    const app = createApp({
      client: clientOver(h.runtime),
      config: configFor({ host: '127.0.0.1' }),
      logger: logger(),
      bullBoard: false,
    });
    expect(await runMatrix(app, 'open')).toEqual([]);
  }, 120_000);

  it('refuses to serve off loopback without a token', () => {
    expect(() =>
      createApp({ client: clientOver(h.runtime), config: configFor({ host: '0.0.0.0' }), logger: logger() }),
    ).toThrow(/without an API token/);
  });
});

describe('scopes beyond the route', () => {
  it('SESSIOND_API_TOKEN is one admin token; SESSIOND_API_TOKEN_SCOPE narrows it', async () => {
    const env = { SESSIOND_API_TOKEN: TOKENS.admin, SESSIOND_HTTP_HOST: '0.0.0.0' };
    const admin = createApp({
      client: clientOver(h.runtime),
      config: { ...loadConfig({ prefix: h.prefix }, env) },
      logger: logger(),
      bullBoard: false,
    });
    const put = await send(
      admin,
      'PUT',
      '/api/retry-policy',
      { authorization: `Bearer ${TOKENS.admin}` },
      { maxAttempts: 7 },
    );
    expect(put.status).toBe(200);
    expect((await send(admin, 'DELETE', '/api/retry-policy', { authorization: `Bearer ${TOKENS.admin}` })).status).toBe(
      200,
    );
    expect(await (await send(admin, 'GET', '/api/whoami', { authorization: `Bearer ${TOKENS.admin}` })).json()).toEqual(
      {
        name: 'SESSIOND_API_TOKEN',
        scope: 'admin',
        via: 'bearer',
        tenant: 'local',
        maxPriority: 1000,
      },
    );

    const reader = createApp({
      client: clientOver(h.runtime),
      config: loadConfig({ prefix: h.prefix }, { ...env, SESSIOND_API_TOKEN_SCOPE: 'read' }),
      logger: logger(),
      bullBoard: false,
    });
    expect((await send(reader, 'GET', '/api/sessions', { authorization: `Bearer ${TOKENS.admin}` })).status).toBe(200);
    expect(
      (await send(reader, 'PUT', '/api/retry-policy', { authorization: `Bearer ${TOKENS.admin}` }, { maxAttempts: 7 }))
        .status,
    ).toBe(403);
  });

  it('a write token may create sessions but not give one a retry policy (403 naming retryPolicy, nothing written)', async () => {
    const app = createApp({
      client: clientOver(h.runtime),
      config: configFor({ tokens: tokenList }),
      logger: logger(),
      bullBoard: false,
    });
    const before = await fingerprint(internals(h.runtime).redis);
    const r = await send(
      app,
      'POST',
      '/api/sessions',
      { authorization: `Bearer ${TOKENS.write}` },
      { prompt: 'hi', retryPolicy: { maxAttempts: 50 } },
    );
    expect(r.status).toBe(403);
    expect(await r.json()).toMatchObject({ issues: [{ field: 'retryPolicy' }] });
    expect(await fingerprint(internals(h.runtime).redis)).toBe(before);
    const ok = await send(
      app,
      'POST',
      '/api/sessions',
      { authorization: `Bearer ${TOKENS.admin}` },
      { prompt: 'hi', retryPolicy: { maxAttempts: 5 } },
    );
    expect(ok.status).toBe(201);
  });

  it('/readyz says ready or unready without details unless authenticated', async () => {
    const app = createApp({
      client: clientOver(h.runtime),
      config: configFor({ tokens: tokenList }),
      logger: logger(),
      bullBoard: false,
    });
    const anonymous = await send(app, 'GET', '/readyz');
    expect(anonymous.status).toBe(503);
    expect(await anonymous.json()).toEqual({ status: 'unready' });
    const known = await send(app, 'GET', '/readyz', { authorization: `Bearer ${TOKENS.read}` });
    expect(await known.json()).toEqual({
      status: 'unready',
      reason: 'no worker has ever sent a heartbeat',
      workers: 0,
    });
    expect((await send(app, 'GET', '/healthz')).status).toBe(200);
  });

  it('Bull Board: reads need read; its actions (at /queues-admin) need admin', async () => {
    const app = createApp({
      client: clientOver(h.runtime),
      config: configFor({ tokens: tokenList }),
      logger: logger(),
    });
    expect((await send(app, 'GET', '/queues/api/queues')).status).toBe(401);
    expect((await send(app, 'GET', '/queues/api/queues', { authorization: `Bearer ${TOKENS.read}` })).status).toBe(200);
    const queue = internals(h.runtime).queue.name;
    const before = await fingerprint(internals(h.runtime).redis);
    for (const token of [TOKENS.read, TOKENS.write]) {
      for (const base of ['/queues', '/queues-admin']) {
        expect(
          (
            await send(app, 'PUT', `${base}/api/queues/${encodeURIComponent(queue)}/pause`, {
              authorization: `Bearer ${token}`,
            })
          ).status,
        ).toBe(403);
      }
      expect((await send(app, 'GET', '/queues-admin/api/queues', { authorization: `Bearer ${token}` })).status).toBe(
        403,
      );
    }
    expect(await fingerprint(internals(h.runtime).redis)).toBe(before);
    // Admin: the actions work at /queues-admin.
    const admin = { authorization: `Bearer ${TOKENS.admin}` };
    expect((await send(app, 'PUT', `/queues-admin/api/queues/${encodeURIComponent(queue)}/pause`, admin)).status).toBe(
      200,
    );
    expect(await internals(h.runtime).queue.queue.isPaused()).toBe(true);
    expect((await send(app, 'PUT', `/queues-admin/api/queues/${encodeURIComponent(queue)}/resume`, admin)).status).toBe(
      200,
    );
    expect(await internals(h.runtime).queue.queue.isPaused()).toBe(false);
  });

  it('a token removed from the configuration no longer opens its cookie or tickets; a narrowed one narrows them', async () => {
    const app = createApp({
      client: clientOver(h.runtime),
      config: configFor({
        tokens: tokenList,
        secret: 'a-shared-secret-of-at-least-32-chars!',
        streamTicketTtl: 60_000,
      }),
      logger: logger(),
      bullBoard: false,
    });
    const cookie =
      (await send(app, 'POST', '/api/login', {}, { token: TOKENS.write })).headers.get('set-cookie')?.split(';')[0] ??
      '';
    expect((await send(app, 'GET', '/api/whoami', { cookie })).status).toBe(200);
    const { sessionId } = await h.runtime.enqueue({ prompt: 'ticketed' });
    const { ticket } = (await (
      await send(app, 'POST', `/api/sessions/${sessionId}/stream-ticket`, { cookie, origin: `http://${HOST}` })
    ).json()) as { ticket: string };
    const stream = await send(app, 'GET', `/api/sessions/${sessionId}/events?ticket=${encodeURIComponent(ticket)}`);
    expect(stream.status).toBe(200);
    await stream.body?.cancel();
    const secret = 'a-shared-secret-of-at-least-32-chars!';
    const removed = createApp({
      client: clientOver(h.runtime),
      config: configFor({ tokens: tokenList.filter((t) => t.scope !== 'write'), secret, streamTicketTtl: 60_000 }),
      logger: logger(),
      bullBoard: false,
    });
    const kept = createApp({
      client: clientOver(h.runtime),
      config: configFor({ tokens: tokenList, secret, streamTicketTtl: 60_000 }),
      logger: logger(),
      bullBoard: false,
    });
    const still = await send(kept, 'GET', `/api/sessions/${sessionId}/events?ticket=${encodeURIComponent(ticket)}`);
    expect(still.status).toBe(200); // the same secret, the token still there: the ticket holds on another server
    await still.body?.cancel();
    expect((await send(removed, 'GET', '/api/whoami', { cookie })).status).toBe(401);
    expect(
      (await send(removed, 'GET', `/api/sessions/${sessionId}/events?ticket=${encodeURIComponent(ticket)}`)).status,
    ).toBe(401);
    // Its token narrowed to read: the cookie is read now, whatever it was signed with.
    const narrowed = createApp({
      client: clientOver(h.runtime),
      config: configFor({ tokens: tokenList.map((t) => (t.scope === 'write' ? { ...t, scope: 'read' } : t)), secret }),
      logger: logger(),
      bullBoard: false,
    });
    expect(await (await send(narrowed, 'GET', '/api/whoami', { cookie })).json()).toMatchObject({
      name: 'write-bot',
      scope: 'read',
      via: 'cookie',
    });
    expect(
      (await send(narrowed, 'POST', `/api/sessions/${sessionId}/cancel`, { cookie, origin: `http://${HOST}` })).status,
    ).toBe(403);
  });
});

describe('logout', () => {
  it('clears the cookie, and this server refuses a copy of the old one from then on', async () => {
    const app = createApp({
      client: clientOver(h.runtime),
      config: configFor({ tokens: tokenList }),
      logger: logger(),
      bullBoard: false,
    });
    const login = await send(app, 'POST', '/api/login', {}, { token: TOKENS.read });
    expect(login.headers.get('set-cookie')).toMatch(
      /^sessiond_login=[^;]+; Max-Age=43200; Path=\/; HttpOnly; SameSite=Strict$/,
    );
    const cookie = login.headers.get('set-cookie')?.split(';')[0] ?? '';
    expect((await send(app, 'GET', '/api/sessions', { cookie })).status).toBe(200);
    const out = await send(app, 'POST', '/api/logout', { cookie });
    expect(out.status).toBe(204);
    expect(out.headers.get('set-cookie')).toMatch(/^sessiond_login=; Max-Age=0/);
    const replay = await send(app, 'GET', '/api/sessions', { cookie });
    expect(replay.status).toBe(401);
    expect(await replay.json()).toEqual({ error: 'logged out: log in again' });
  });
});

describe('tokens configuration', () => {
  it('SESSIOND_API_TOKENS_FILE: a JSON file of {name, scope, sha256}, merged with http.tokens; a bad one names the file and the entry', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sessiond-tokens-'));
    try {
      const file = join(dir, 'tokens.json');
      writeFileSync(file, JSON.stringify([{ name: 'ci', scope: 'write', sha256: sha(TOKENS.write).toUpperCase() }]));
      const config = loadConfig(
        {},
        {
          SESSIOND_API_TOKENS_FILE: file,
          SESSIOND_API_TOKENS: JSON.stringify([{ name: 'ops', scope: 'admin', sha256: sha(TOKENS.admin) }]),
        },
      );
      expect(config.http.tokens).toEqual([
        { name: 'ops', scope: 'admin', sha256: sha(TOKENS.admin) },
        { name: 'ci', scope: 'write', sha256: sha(TOKENS.write) },
      ]);
      writeFileSync(file, JSON.stringify([{ name: 'ci', scope: 'write', sha256: sha(TOKENS.write), extra: 1 }]));
      expect(() => loadConfig({}, { SESSIOND_API_TOKENS_FILE: file })).toThrow(
        /http\.tokensFile: \[0\]: .*extra.*SESSIOND_API_TOKENS_FILE/,
      );
      expect(() => loadConfig({}, { SESSIOND_API_TOKENS_FILE: join(dir, 'missing.json') })).toThrow(
        /http\.tokensFile: cannot read .*missing\.json/,
      );
      writeFileSync(file, JSON.stringify([{ name: 'ops', scope: 'read', sha256: sha('other-token') }]));
      expect(() =>
        loadConfig(
          {},
          {
            SESSIOND_API_TOKENS_FILE: file,
            SESSIOND_API_TOKENS: JSON.stringify([{ name: 'ops', scope: 'admin', sha256: sha(TOKENS.admin) }]),
          },
        ),
      ).toThrow(/duplicate token name "ops"/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a tokens list names the field of a bad entry, and no token is ever in the message', () => {
    expect(() =>
      loadConfig({}, { SESSIOND_API_TOKENS: JSON.stringify([{ name: 'ci', scope: 'root', sha256: sha('x') }]) }),
    ).toThrow(/http\.tokens\.0\.scope: must be one of read, write, admin/);
    expect(() =>
      loadConfig(
        {},
        { SESSIOND_API_TOKENS: JSON.stringify([{ name: 'ci', scope: 'read', sha256: 'plaintext-token-here' }]) },
      ),
    ).toThrow(/http\.tokens\.0\.sha256: must be the SHA-256/);
    expect(() =>
      loadConfig(
        {},
        {
          SESSIOND_API_TOKENS: JSON.stringify([
            { name: 'a', scope: 'read', sha256: sha('x') },
            { name: 'a', scope: 'admin', sha256: sha('y') },
          ]),
        },
      ),
    ).toThrow(/duplicate token name "a"/);
    try {
      loadConfig(
        {},
        { SESSIOND_API_TOKENS: JSON.stringify([{ name: 'ci', scope: 'read', sha256: 'plaintext-token-here' }]) },
      );
    } catch (error) {
      expect((error as Error).message).not.toContain('plaintext-token-here');
    }
  });
});

describe('audit log', () => {
  it('one line per mutating and per refused request: token name, scope, route, session id, outcome, client — never the token', async () => {
    logLines.length = 0;
    const app = createApp({
      client: clientOver(h.runtime),
      config: configFor({ tokens: tokenList }),
      logger: logger(),
      bullBoard: false,
    });
    const { sessionId } = await h.runtime.enqueue({ prompt: 'audited' });
    await send(
      app,
      'POST',
      `/api/sessions/${sessionId}/cancel`,
      { authorization: `Bearer ${TOKENS.write}` },
      { reason: 'audit me' },
    );
    await send(app, 'PUT', '/api/retry-policy', { authorization: `Bearer ${TOKENS.read}` }, { maxAttempts: 3 });
    await send(app, 'GET', `/api/sessions/${sessionId}`);
    await send(app, 'GET', `/api/sessions/${sessionId}`, { authorization: `Bearer ${TOKENS.read}` }); // an allowed read: no audit line
    await send(app, 'GET', '/api/sessions', { host: 'rebind.attacker.example' });
    const audit = logLines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'audit');
    expect(audit).toEqual([
      expect.objectContaining({
        tokenName: 'write-bot',
        scope: 'write',
        method: 'POST',
        route: '/api/sessions/{id}/cancel',
        sessionId,
        status: 202,
        outcome: 'ok',
      }),
      expect.objectContaining({
        tokenName: 'read-bot',
        scope: 'read',
        method: 'PUT',
        route: '/api/retry-policy',
        sessionId: null,
        status: 403,
        outcome: 'refused',
        reason: 'scope',
      }),
      expect.objectContaining({
        tokenName: null,
        method: 'GET',
        route: '/api/sessions/{id}',
        sessionId,
        status: 401,
        outcome: 'refused',
        reason: 'no credential',
      }),
      expect.objectContaining({
        tokenName: null,
        method: 'GET',
        route: '/api/sessions',
        status: 421,
        outcome: 'refused',
        reason: 'host',
      }),
    ]);
    for (const line of audit) expect(line).toHaveProperty('client');
    for (const token of Object.values(TOKENS)) expect(logLines.join('\n')).not.toContain(token);
    expect(logLines.join('\n')).not.toContain('audit me');

    // Over a real socket: the client's address; a login's token (in its body) is never logged either.
    logLines.length = 0;
    const server = await startServer({
      client: clientOver(h.runtime),
      config: configFor({ tokens: tokenList }),
      logger: logger(),
      port: 0,
      bullBoard: false,
    });
    try {
      await fetch(`${server.url}/api/sessions`);
      await fetch(`${server.url}/api/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token: TOKENS.admin }),
      });
      await fetch(`${server.url}/api/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token: 'a-wrong-token-0123456789' }),
      });
    } finally {
      await server.close(500);
    }
    const real = logLines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'audit');
    expect(real).toEqual([
      expect.objectContaining({ route: '/api/sessions', status: 401, client: expect.stringMatching(/127\.0\.0\.1/) }),
      expect.objectContaining({
        route: '/api/login',
        status: 200,
        outcome: 'ok',
        client: expect.stringMatching(/127\.0\.0\.1/),
      }),
      expect.objectContaining({
        route: '/api/login',
        status: 401,
        outcome: 'refused',
        client: expect.stringMatching(/127\.0\.0\.1/),
      }),
    ]);
    expect(logLines.join('\n')).not.toContain('a-wrong-token');
    const all = logLines.join('\n');
    for (const token of Object.values(TOKENS)) expect(all).not.toContain(token);
    expect(all).not.toContain('audit me');
  });
});
