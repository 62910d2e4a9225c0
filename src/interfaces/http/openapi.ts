import { z } from 'zod';
import { RetryPolicySchema } from '../../retry/policy.ts';
import { FAILURE_CATEGORIES } from '../../protocol/messages.ts';
import { SESSION_STATES } from '../../../machines/states.ts';
import { SCOPE_KEY, type RouteScope } from './auth/route-scopes.ts';
import { ApprovalBody, CancelBody, CreateSessionBody, DispatchBody, LoginBody, PromptBody } from './schemas.ts';
import { controlPaths } from './controls.ts';

/**
 * The OpenAPI 3.1 document of the HTTP API, served at `/openapi.json`. Request
 * bodies are generated from the very zod schemas the handlers validate with;
 * `test/interfaces/http/api.test.ts` checks that every route the app serves is
 * here and every path here is served, and that the examples are accepted.
 */

type Json = Record<string, unknown>;

function schemaOf(schema: z.ZodType, io: 'input' | 'output' = 'input'): Json {
  const json = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Json;
  return strip(json) as Json;
}

/** Drops `$schema` and zod's `readOnly` markers (readonly arrays), which mean something else in OpenAPI. */
function strip(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(strip);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([k]) => k !== '$schema' && k !== 'readOnly')
      .map(([k, v]) => [k, strip(v)]),
  );
}

const ref = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: Json, description: string, extra: Json = {}): Json => ({ description, content: { 'application/json': { schema, ...extra } } });
const error = (description: string): Json => json(ref('Error'), description);
const invalid = (description = 'a field is invalid: `issues` name each one'): Json => json(ref('ValidationError'), description);

const idParam = {
  name: 'id',
  in: 'path',
  required: true,
  description: 'Session id (1-100 letters, digits or _.-, not . or ..)',
  schema: { type: 'string', pattern: '^(?!\\.{1,2}$)[A-Za-z0-9_.-]{1,100}$' },
};
/**
 * Each operation's scope, in `x-sessiond-scope`: the one place it is declared. The guard
 * (auth/guard.ts) enforces it and the route × scope test checks every operation has one.
 */
const scope = (s: RouteScope, security: Json[] = [{ bearerAuth: [] }, { loginCookie: [] }]): Json => ({ [SCOPE_KEY]: s, security: s === 'public' ? [] : security });
const PUBLIC = scope('public');
const READ = scope('read');
const WRITE = scope('write');
const ADMIN = scope('admin');
const STREAM = scope('read', [{ bearerAuth: [] }, { loginCookie: [] }, { streamTicket: [] }]);
const mutatingErrors = {
  '401': error('a token is configured and the request has no valid credential (`Authorization: Bearer <token>` or the login cookie)'),
  '403': error("the token's scope does not cover this route, or a cross-origin request (`Origin` not allowed)"),
  '413': error('the body is larger than `http.bodyLimitBytes`'),
  '415': error('a body not sent as `application/json`'),
};

/** Request examples by operationId, each a body the API accepts (tested). */
export const REQUEST_EXAMPLES: Record<string, Record<string, { summary: string; value: unknown }>> = {
  createSession: {
    minimal: { summary: 'a prompt, default agent options', value: { prompt: 'List the files in this directory' } },
    full: {
      summary: 'own id, agent options and a retry policy of its own',
      value: {
        sessionId: 'build-42',
        prompt: 'Fix the failing test',
        options: { cwd: '/tmp', provider: 'fake', model: 'text', thinking: 'low' },
        retryPolicy: { maxAttempts: 3, initialDelayMs: 500 },
      },
    },
  },
  addPrompt: { next: { summary: 'the next prompt of the conversation', value: { prompt: 'Now explain the change' } } },
  decideApproval: {
    allow: { summary: "allow, with the agent's allow_once option", value: { decision: 'allow', option: 'allow_once' } },
    deny: { summary: 'deny, with a reason', value: { decision: 'deny', reason: 'not on this branch' } },
  },
  cancelSession: { reason: { summary: 'with a reason', value: { reason: 'taking too long' } }, empty: { summary: 'no reason', value: {} } },
  putRetryPolicy: { patch: { summary: 'change some fields; the rest keep their value', value: { maxAttempts: 5, initialDelayMs: 2000, jitter: 'full' } } },
  login: { token: { summary: 'a configured token', value: { token: 'the-token-you-were-given' } } },
  // `{"limit": NAME}` pauses (resumes) one limit of the deployment's (SESSIOND_LIMITS) only.
  pauseDispatch: { fleet: { summary: 'the whole fleet', value: {} } },
  resumeDispatch: { fleet: { summary: 'the whole fleet', value: {} } },
  putSessionRetryPolicy: { patch: { summary: "this session's own policy", value: { maxAttempts: 2, retryOn: ['server_error', 'network'] } } },
};

const body = (operationId: string, schema: Json, required = true): Json => ({
  required,
  content: { 'application/json': { schema, examples: REQUEST_EXAMPLES[operationId] } },
});

let cached: Json | null = null;

export function openApiDocument(): Json {
  cached ??= withAuthErrors(build());
  return cached;
}

/** Every operation that needs a scope can answer 401 (no valid credential) and 403 (scope too low, or Host/Origin refused). */
function withAuthErrors(doc: Json): Json {
  for (const ops of Object.values(doc.paths as Record<string, Record<string, Json>>)) {
    for (const op of Object.values(ops)) {
      if (op[SCOPE_KEY] === 'public') continue;
      const responses = (op.responses ?? {}) as Json;
      responses['401'] ??= error('a token is configured and the request has no valid credential');
      responses['403'] ??= error("the credential's scope does not cover this route");
      op.responses = responses;
    }
  }
  return doc;
}

function build(): Json {
  const policyPatch = schemaOf(RetryPolicySchema, 'input');
  const policy = schemaOf(RetryPolicySchema, 'output');
  return {
    openapi: '3.1.0',
    info: {
      title: 'sessiond',
      version: '0.1.0',
      description: [
        'Chat sessions with CLI coding agents as durable actors: enqueue prompts, watch sessions stream, cancel, configure the retry policy.',
        'Auth: when the server has a token (`SESSIOND_API_TOKEN`, `http.tokens`; required when bound to anything but loopback), every route but the public ones needs a credential whose scope covers it (`x-sessiond-scope`: read ⊂ write ⊂ admin): `Authorization: Bearer <token>`, the dashboard login cookie, or, for the event stream, a stream ticket (`?ticket=`).',
        'Errors are JSON `{error, issues?}`; a 400 lists `issues: [{field, message}]` naming each bad field. The dashboard is served at `/`, Bull Board (the raw BullMQ queue) at `/queues`.',
      ].join('\n\n'),
    },
    servers: [{ url: '/' }],
    tags: [
      { name: 'sessions' },
      { name: 'messages' },
      { name: 'retry-policy' },
      { name: 'operations' },
      { name: 'auth', description: 'login cookie and stream tickets' },
      { name: 'dashboard', description: 'HTML pages and their static files' },
    ],
    paths: {
      ...controlPaths(),
      '/api/sessions': {
        get: {
          operationId: 'listSessions',
          tags: ['sessions'],
          summary: 'List sessions, newest first, optionally of one state',
          ...READ,
          parameters: [
            { name: 'state', in: 'query', schema: { type: 'string', enum: SESSION_STATES } },
            { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 1000, default: 100 } },
            { name: 'cursor', in: 'query', description: 'the `next` of the previous page', schema: { type: 'string' } },
            { name: 'If-None-Match', in: 'header', description: 'the `ETag` of an earlier answer: 304 when nothing in the listing changed', schema: { type: 'string' } },
          ],
          responses: {
            '200': json(ref('SessionList'), 'the sessions (an `ETag` header; `next`: the cursor of the next page, null on the last)'),
            '304': { description: 'nothing in the listing changed since that ETag' },
            '400': invalid(),
          },
        },
        post: {
          operationId: 'createSession',
          tags: ['sessions'],
          summary: 'Create a session with a prompt (or add the prompt to the session `sessionId` if it exists)',
          ...WRITE,
          requestBody: body('createSession', schemaOf(CreateSessionBody)),
          responses: {
            '201': json(ref('Enqueued'), 'created; the prompt is turn 1'),
            '202': json(ref('Enqueued'), 'the session existed: the prompt was added to it'),
            '400': invalid('malformed JSON, or a field is invalid (`issues` name each one)'),
            ...mutatingErrors,
          },
        },
      },
      '/api/sessions/{id}': {
        get: {
          operationId: 'getSession',
          tags: ['sessions'],
          summary: 'A session: state, latest turn with its attempts, transition history, machine context',
          ...READ,
          parameters: [idParam],
          responses: { '200': json(ref('SessionDetail'), 'the session'), '404': error('unknown session') },
        },
        delete: {
          operationId: 'deleteSession',
          tags: ['sessions'],
          summary: 'Delete a session fleet-wide: every key, its message log, agent state, activation job and index entries',
          description:
            'Without `force`, only a finished session (nothing running, waiting, backing off or queued); with `force=true` a running turn is cancelled first (its process tree gone). Deleting again within the hour answers `deleted: false`.',
          ...ADMIN,
          parameters: [idParam, { name: 'force', in: 'query', schema: { type: 'string', enum: ['true', 'false', '1', '0'] } }],
          responses: {
            '200': json(
              {
                type: 'object',
                required: ['sessionId', 'deleted', 'cancelled'],
                properties: { sessionId: { type: 'string' }, deleted: { type: 'boolean' }, cancelled: { type: 'boolean' } },
              },
              'deleted (deleted: false when it already was)',
            ),
            '400': invalid(),
            '404': error('unknown session'),
            '409': error('the session is active and force was not given'),
            ...mutatingErrors,
          },
        },
      },
      '/api/sessions/{id}/export': {
        get: {
          operationId: 'exportSession',
          tags: ['sessions'],
          summary: 'The session as a versioned JSON-lines archive (header, meta, snapshot, history, every message, agent state, queued prompts, end) for `sessiond import`',
          ...READ,
          parameters: [idParam],
          responses: {
            '200': { description: 'the archive', content: { 'application/x-ndjson': { schema: { type: 'string' } } } },
            '404': error('unknown session'),
            '409': error('the session is being deleted'),
          },
        },
      },
      '/api/sessions/{id}/prompts': {
        post: {
          operationId: 'addPrompt',
          tags: ['sessions'],
          summary: 'Add a prompt to a session (it waits for the current turn to end)',
          ...WRITE,
          parameters: [idParam],
          requestBody: body('addPrompt', schemaOf(PromptBody)),
          responses: {
            '202': json(ref('Enqueued'), 'queued as the next turn'),
            '400': invalid(),
            '404': error('unknown session'),
            '409': error('the session is being deleted, or its message log is full (`limit`: maxLogMessages): the prompt was not stored'),
            '429': error('too many prompts waiting (`limit`: maxQueuedPrompts): the prompt was not stored'),
            ...mutatingErrors,
          },
        },
      },
      '/api/sessions/{id}/cancel': {
        post: {
          operationId: 'cancelSession',
          tags: ['sessions'],
          summary: "Cancel the session's current turn, wherever it runs",
          ...WRITE,
          parameters: [idParam],
          requestBody: body('cancelSession', schemaOf(CancelBody), false),
          responses: {
            '202': json(
              { type: 'object', required: ['sessionId', 'delivered'], properties: { sessionId: { type: 'string' }, delivered: { enum: ['worker', 'activation'] } } },
              'the cancel was recorded and delivered',
            ),
            '400': invalid(),
            '404': error('unknown session'),
            ...mutatingErrors,
          },
        },
      },
      '/api/sessions/{id}/approvals/{requestId}': {
        post: {
          operationId: 'decideApproval',
          tags: ['sessions'],
          summary: "Answer an agent's permission request (the session's `approvals`): allow or deny; the first decision wins",
          ...WRITE,
          parameters: [
            idParam,
            {
              name: 'requestId',
              in: 'path',
              required: true,
              description: 'The request id of its approval.requested message',
              schema: { type: 'string', pattern: '^t\\d{1,9}-[0-9a-f]{12}-\\d{1,4}$' },
            },
          ],
          requestBody: body('decideApproval', schemaOf(ApprovalBody)),
          responses: {
            '200': json(
              {
                type: 'object',
                required: ['sessionId', 'requestId', 'outcome', 'optionId', 'by', 'at'],
                properties: {
                  sessionId: { type: 'string' },
                  requestId: { type: 'string' },
                  outcome: { enum: ['allowed', 'denied'] },
                  optionId: { type: ['string', 'null'] },
                  by: { type: 'string' },
                  at: { type: 'integer' },
                },
              },
              'the decision was stored; the worker holding the session gives it to the agent (or the next activation does, when the agent asks again)',
            ),
            '400': invalid(),
            '404': error('unknown session or request (its turn may be over)'),
            '409': error('the request was already decided'),
            ...mutatingErrors,
          },
        },
      },
      '/api/sessions/{id}/messages': {
        get: {
          operationId: 'listMessages',
          tags: ['messages'],
          summary: 'A page of the message log, from a seq on',
          ...READ,
          parameters: [
            idParam,
            { name: 'from', in: 'query', description: 'first seq (default 1)', schema: { type: 'integer', minimum: 1 } },
            { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 1000, default: 500 } },
          ],
          responses: { '200': json(ref('MessagePage'), 'the page; ask again from `nextFrom`'), '400': invalid(), '404': error('unknown session') },
        },
      },
      '/api/sessions/{id}/events': {
        get: {
          operationId: 'streamEvents',
          tags: ['messages'],
          summary: 'Live message stream (Server-Sent Events): every stored message from `from` (or after `Last-Event-ID`), then new ones as they are written',
          description:
            'Each event: `id:` the seq, `event:` the message type, `data:` `{seq, turn, attempt, type, content}`. A reconnecting EventSource sends `Last-Event-ID` and resumes with the next seq: no gap, no duplicate. Comments (`: keep-alive`) are sent every 15 s. Bounded: at most `http.maxStreams` streams per server (503 with Retry-After beyond), closed after `http.streamIdleTimeout` without a message, and when the stream ticket (or login) it was opened with expires.',
          ...STREAM,
          parameters: [
            idParam,
            { name: 'from', in: 'query', description: 'first seq (default 1); `Last-Event-ID` wins', schema: { type: 'integer', minimum: 1 } },
            { name: 'Last-Event-ID', in: 'header', description: 'the last seq received: the stream resumes after it', schema: { type: 'string', pattern: '^\\d+$' } },
            {
              name: 'ticket',
              in: 'query',
              description: 'a stream ticket (`POST /api/sessions/{id}/stream-ticket`), for clients that cannot send headers',
              schema: { type: 'string' },
            },
          ],
          responses: {
            '200': {
              description: 'the event stream',
              content: { 'text/event-stream': { schema: { type: 'string', description: 'SSE events whose `data` is a `Message` (see components)' } } },
            },
            '400': invalid('a bad `from` or `Last-Event-ID`'),
            '401': error('no valid credential, or an expired stream ticket'),
            '404': error('unknown session'),
            '503': error('`http.maxStreams` streams are live; `Retry-After` says when to try again'),
          },
        },
      },
      '/api/retry-policy': {
        get: {
          operationId: 'getRetryPolicy',
          tags: ['retry-policy'],
          summary: 'The global retry policy',
          ...READ,
          responses: { '200': json(ref('PolicyResponse'), 'the policy and where it comes from') },
        },
        put: {
          operationId: 'putRetryPolicy',
          tags: ['retry-policy'],
          summary: 'Change fields of the global policy; on any invalid field nothing is changed',
          ...ADMIN,
          requestBody: body('putRetryPolicy', policyPatch),
          responses: {
            '200': json(ref('PolicyResponse'), 'the new policy'),
            '400': invalid('a field is out of range (`issues` name it and the allowed range); nothing changed'),
            ...mutatingErrors,
          },
        },
        delete: {
          operationId: 'resetRetryPolicy',
          tags: ['retry-policy'],
          summary: 'Back to the defaults',
          ...ADMIN,
          responses: { '200': json(ref('PolicyResponse'), 'the default policy'), ...mutatingErrors },
        },
      },
      '/api/sessions/{id}/retry-policy': {
        get: {
          operationId: 'getSessionRetryPolicy',
          tags: ['retry-policy'],
          summary: 'The policy in force for a session: its own, else the global one',
          ...READ,
          parameters: [idParam],
          responses: { '200': json(ref('PolicyResponse'), 'the policy and its source'), '404': error('unknown session') },
        },
        put: {
          operationId: 'putSessionRetryPolicy',
          tags: ['retry-policy'],
          summary: 'Give a session a policy of its own (fields over the one in force); the running turn takes it at its next retry decision',
          ...ADMIN,
          parameters: [idParam],
          requestBody: body('putSessionRetryPolicy', policyPatch),
          responses: {
            '200': json(ref('PolicyResponse'), 'the new policy'),
            '400': invalid('a field is out of range; nothing changed'),
            '404': error('unknown session'),
            ...mutatingErrors,
          },
        },
        delete: {
          operationId: 'resetSessionRetryPolicy',
          tags: ['retry-policy'],
          summary: "Drop a session's own policy: it follows the global one again",
          ...ADMIN,
          parameters: [idParam],
          responses: { '200': json(ref('PolicyResponse'), 'the policy now in force'), '404': error('unknown session'), ...mutatingErrors },
        },
      },
      '/api/deployment-policy': {
        get: {
          operationId: 'getDeploymentPolicy',
          tags: ['sessions'],
          summary:
            "What callers of this deployment may choose: agents, cwd and agentDir roots, maximum idle timeout and prompt size, and each agent's permission ceiling, allowed lists and switches",
          ...READ,
          responses: {
            '200': json(
              { type: 'object', required: ['agents', 'workspace', 'workspaceRoots', 'agentDirRoots', 'maxIdleTimeoutMs', 'maxPromptChars', 'permissions', 'approvals'] },
              'the deployment policy',
            ),
          },
        },
      },
      '/api/limits': {
        get: {
          operationId: 'getLimits',
          tags: ['limits'],
          summary: 'The fleet limits: each rule, what its keys hold and how many sessions wait, cooldowns, and whether dispatch is paused',
          ...READ,
          responses: { '200': json({ type: 'object', required: ['paused', 'limits'] }, 'the limits') },
        },
      },
      '/api/dispatch/pause': {
        post: {
          operationId: 'pauseDispatch',
          tags: ['limits'],
          summary: 'Pause starting attempts fleet-wide, or under one limit (`{"limit": NAME}`): running turns finish, cancels still work',
          ...ADMIN,
          requestBody: body('pauseDispatch', schemaOf(DispatchBody), false),
          responses: { '200': json({ type: 'object', required: ['paused'] }, 'what is paused now'), '400': invalid(), ...mutatingErrors },
        },
      },
      '/api/dispatch/resume': {
        post: {
          operationId: 'resumeDispatch',
          tags: ['limits'],
          summary: 'Start attempts again, fleet-wide or under one limit; the sessions waiting for it are woken in order',
          ...ADMIN,
          requestBody: body('resumeDispatch', schemaOf(DispatchBody), false),
          responses: {
            '200': json({ type: 'object', required: ['paused', 'woken'] }, 'what is still paused, and how many sessions were woken'),
            '400': invalid(),
            ...mutatingErrors,
          },
        },
      },
      '/api/login': {
        post: {
          operationId: 'login',
          tags: ['auth'],
          summary: 'Exchange a token for the dashboard login cookie (HttpOnly, SameSite=Strict, Secure over HTTPS)',
          ...PUBLIC,
          requestBody: body('login', schemaOf(LoginBody)),
          responses: { '200': json(ref('Principal'), 'logged in; `Set-Cookie: sessiond_login=…`'), '400': invalid(), ...mutatingErrors },
        },
      },
      '/api/logout': {
        post: {
          operationId: 'logout',
          tags: ['auth'],
          summary: 'Clear the login cookie',
          ...PUBLIC,
          responses: { '204': { description: 'logged out (`Set-Cookie` clears it)' }, ...mutatingErrors },
        },
      },
      '/api/whoami': {
        get: {
          operationId: 'whoami',
          tags: ['auth'],
          summary: "The caller's token name and scope",
          ...READ,
          responses: { '200': json(ref('Principal'), 'who you are'), '401': error('no valid credential') },
        },
      },
      '/api/sessions/{id}/stream-ticket': {
        post: {
          operationId: 'streamTicket',
          tags: ['auth'],
          summary: "A short-lived signed ticket that opens this session's event stream (`EventSource` cannot send headers)",
          description:
            'HMAC over the session id, scope and expiry (`http.streamTicketTtl`, default 5 min, never past the login). The stream ends when the ticket expires; reconnects with `Last-Event-ID` work until then, then get a new ticket and resume.',
          ...READ,
          parameters: [idParam],
          responses: {
            '200': json(
              { type: 'object', required: ['ticket', 'expiresAt', 'url'], properties: { ticket: { type: 'string' }, expiresAt: { type: 'integer' }, url: { type: 'string' } } },
              'the ticket',
            ),
            '404': error('unknown session'),
            ...mutatingErrors,
          },
        },
      },
      '/api/chart': {
        get: {
          operationId: 'getChart',
          tags: ['sessions'],
          summary: "The session machine's states and transitions",
          ...READ,
          responses: { '200': json(ref('Chart'), 'the statechart') },
        },
      },
      '/healthz': {
        get: {
          operationId: 'health',
          tags: ['operations'],
          summary: 'The process is up',
          ...PUBLIC,
          responses: { '200': json({ type: 'object', properties: { status: { const: 'ok' } } }, 'up') },
        },
      },
      '/readyz': {
        get: {
          operationId: 'ready',
          tags: ['operations'],
          summary: 'Redis answers PING and a worker heartbeat was seen recently',
          ...PUBLIC,
          responses: {
            '200': json(
              {
                type: 'object',
                required: ['status'],
                description: '`workers`, `containment` and `sandbox` only with a credential, when a token is configured',
                properties: {
                  status: { const: 'ready' },
                  workers: { type: 'integer' },
                  containment: {
                    type: 'array',
                    description: 'per live worker: `cgroup` (a cgroup per attempt, killed whole) or `sweep` (marker, group and parent links only), with the detail',
                    items: { type: 'object' },
                  },
                  sandbox: {
                    type: 'array',
                    description:
                      'per live worker: its sandbox mode (`bwrap`, `landlock` or `none`), the detail, `gaps` (what the mode cannot stop) and `refused` (the mode asked for is unavailable: attempts fail); see docs/sandbox.md',
                    items: { type: 'object' },
                  },
                },
              },
              'ready',
            ),
            '503': json({ type: 'object', required: ['status', 'reason'], properties: { status: { const: 'unready' }, reason: { type: 'string' } } }, 'not ready, with the reason'),
          },
        },
      },
      '/metrics': {
        get: {
          operationId: 'metrics',
          tags: ['operations'],
          summary: 'Prometheus metrics (text format)',
          ...READ,
          responses: { '200': { description: 'the metrics', content: { 'text/plain': { schema: { type: 'string' } } } } },
        },
      },
      '/openapi.json': {
        get: { operationId: 'openapi', tags: ['operations'], summary: 'This document', ...READ, responses: { '200': json({ type: 'object' }, 'the OpenAPI document') } },
      },
      '/': { get: { operationId: 'dashboard', tags: ['dashboard'], summary: 'The dashboard: sessions by state', ...PUBLIC, responses: { '200': html('the page') } } },
      '/sessions/{id}': {
        get: {
          operationId: 'dashboardSession',
          tags: ['dashboard'],
          summary: 'The dashboard page of a session',
          ...PUBLIC,
          parameters: [idParam],
          responses: { '200': html('the page') },
        },
      },
      '/web/{module}': {
        get: {
          operationId: 'dashboardScript',
          tags: ['dashboard'],
          summary: "One of the dashboard's ES modules (app.js and what it imports)",
          ...PUBLIC,
          parameters: [{ name: 'module', in: 'path', required: true, schema: { type: 'string', pattern: '^[a-z-]+\\.js$' }, example: 'app.js' }],
          responses: { '200': { description: 'JavaScript module', content: { 'text/javascript': { schema: { type: 'string' } } } }, '404': { description: 'no such module' } },
        },
      },
      '/web/style.css': {
        get: {
          operationId: 'dashboardStyle',
          tags: ['dashboard'],
          summary: "The dashboard's style sheet",
          ...PUBLIC,
          responses: { '200': { description: 'CSS', content: { 'text/css': { schema: { type: 'string' } } } } },
        },
      },
    },
    components: {
      securitySchemes: {
        bearerAuth: { type: 'http', scheme: 'bearer', description: 'a configured token (`SESSIOND_API_TOKEN`, `http.tokens`); its scope must cover the route' },
        loginCookie: {
          type: 'apiKey',
          in: 'cookie',
          name: 'sessiond_login',
          description: 'set by `POST /api/login` (HttpOnly, SameSite=Strict); a mutation with it must carry an allowed `Origin`',
        },
        streamTicket: {
          type: 'apiKey',
          in: 'query',
          name: 'ticket',
          description: "from `POST /api/sessions/{id}/stream-ticket`: opens that session's event stream until it expires",
        },
      },
      schemas: {
        Error: { type: 'object', required: ['error'], properties: { error: { type: 'string' } } },
        Principal: {
          type: 'object',
          required: ['name', 'scope', 'via'],
          properties: {
            name: { type: ['string', 'null'] },
            scope: { enum: ['read', 'write', 'admin'] },
            via: { enum: ['bearer', 'cookie', 'ticket', 'open'] },
            expiresAt: { type: 'integer' },
          },
        },
        ValidationError: {
          type: 'object',
          required: ['error', 'issues'],
          properties: {
            error: { type: 'string' },
            issues: {
              type: 'array',
              items: {
                type: 'object',
                required: ['field', 'message'],
                properties: { field: { type: 'string', description: 'dotted path, e.g. `options.model`, `retryPolicy.maxAttempts`, or `(body)`' }, message: { type: 'string' } },
              },
            },
          },
        },
        Enqueued: {
          type: 'object',
          required: ['sessionId', 'turn'],
          properties: { sessionId: { type: 'string' }, turn: { type: 'integer', description: 'the turn this prompt will run as' }, created: { type: 'boolean' } },
        },
        Attempt: {
          type: 'object',
          required: ['attempt', 'outcome', 'startedAt', 'endedAt'],
          properties: {
            attempt: { type: 'integer' },
            outcome: { enum: ['completed', 'failed', 'interrupted', 'cancelled', null] },
            category: { enum: [...FAILURE_CATEGORIES] },
            errorText: { type: 'string' },
            delayMs: { type: 'integer', description: 'the backoff that followed, when a retry was scheduled' },
            quotaWall: { enum: ['free', 'counted'], description: 'it ended on a quota wall (the session parked until the reset); free: not counted against maxAttempts' },
            startedAt: { type: 'integer' },
            endedAt: { type: ['integer', 'null'] },
            usage: ref('Usage'),
          },
        },
        Usage: {
          type: 'object',
          description: 'tokens the agent reported in its terminal messages (only the kinds it reported)',
          properties: {
            input: { type: 'number' },
            output: { type: 'number' },
            cacheRead: { type: 'number' },
            cacheWrite: { type: 'number' },
            totalTokens: { type: 'number' },
            cost: { type: 'number' },
          },
        },
        Transition: {
          type: 'object',
          required: ['at', 'from', 'to', 'event'],
          properties: { at: { type: 'integer' }, from: { type: 'string' }, to: { type: 'string' }, event: { type: 'string' } },
        },
        TurnSummary: {
          type: ['object', 'null'],
          required: ['index', 'status', 'attempts'],
          properties: {
            index: { type: 'integer' },
            status: { enum: ['queued', 'running', 'backoff', 'parked', 'completed', 'failed', 'cancelled'] },
            prompt: { type: ['string', 'null'] },
            failureReason: { type: 'string' },
            cancelReason: { type: 'string' },
            attempts: { type: 'array', items: ref('Attempt') },
            usage: ref('Usage'),
            attemptsCounted: { type: 'integer', description: 'attempts counted against maxAttempts (free quota walls are not)' },
          },
        },
        SessionList: {
          type: 'object',
          required: ['sessions', 'next'],
          properties: {
            next: { type: ['string', 'null'], description: 'the cursor of the next page (`?cursor=`), null on the last page' },
            sessions: {
              type: 'array',
              items: {
                type: 'object',
                required: ['sessionId', 'state', 'agent', 'createdAt', 'updatedAt', 'turn', 'queuedPrompts'],
                properties: {
                  sessionId: { type: 'string' },
                  state: { type: 'string', enum: SESSION_STATES },
                  agent: { type: 'string' },
                  createdAt: { type: 'integer' },
                  updatedAt: { type: 'integer' },
                  turn: {
                    type: ['object', 'null'],
                    properties: { index: { type: 'integer' }, status: { type: 'string' }, attempts: { type: 'integer' }, prompt: { type: ['string', 'null'] } },
                  },
                  nextRetryAt: { type: 'integer' },
                  parkedUntil: {
                    type: 'object',
                    description: "parked at a quota wall: the provider's reset, since when, and whether the attempt was free",
                    properties: { until: { type: 'integer' }, since: { type: 'integer' }, free: { type: 'boolean' } },
                  },
                  lastFailure: { type: 'object', properties: { category: { type: 'string' }, at: { type: 'integer' } } },
                  queuedPrompts: { type: 'integer' },
                },
              },
            },
          },
        },
        SessionDetail: {
          type: 'object',
          required: ['sessionId', 'state', 'agent', 'turn', 'history', 'policy', 'policySource', 'lastSeq', 'context'],
          properties: {
            sessionId: { type: 'string' },
            state: { type: 'string', enum: SESSION_STATES },
            agent: { type: 'string' },
            createdAt: { type: 'integer' },
            updatedAt: { type: 'integer' },
            agentSessionId: { type: ['string', 'null'] },
            turn: ref('TurnSummary'),
            nextRetryAt: { type: 'integer' },
            parkedUntil: {
              type: 'object',
              description: "parked at a quota wall: the provider's reset, since when, and whether the attempt was free",
              properties: { until: { type: 'integer' }, since: { type: 'integer' }, free: { type: 'boolean' } },
            },
            lastFailure: { type: 'object', properties: { category: { type: 'string' }, errorText: { type: 'string' }, at: { type: 'integer' } } },
            usage: {
              type: 'object',
              description: 'tokens the session’s attempts reported, summed, in all and per agent and model (absent: none reported)',
              properties: {
                total: ref('Usage'),
                byModel: { type: 'array', items: { type: 'object', properties: { agent: { type: 'string' }, model: { type: 'string' }, usage: ref('Usage') } } },
              },
            },
            policy: {},
            policySource: { enum: ['session', 'global'] },
            queuedPrompts: { type: 'integer' },
            history: { type: 'array', items: ref('Transition') },
            lastSeq: { type: 'integer' },
            heldBy: { type: ['string', 'null'], description: 'the worker holding the session, if any' },
            approvals: {
              type: 'array',
              description:
                'permission requests of the running turn not yet given to the agent; the session awaits approval while one has no `decision` (answer with POST …/approvals/{requestId})',
              items: {
                type: 'object',
                required: ['requestId', 'tool', 'arguments', 'options', 'requestedAt', 'deadlineAt'],
                properties: {
                  requestId: { type: 'string' },
                  tool: { type: 'string' },
                  kind: { type: 'string' },
                  arguments: {},
                  options: { type: 'array', items: { type: 'object', properties: { optionId: { type: 'string' }, name: { type: 'string' }, kind: { type: 'string' } } } },
                  requestedAt: { type: 'integer' },
                  deadlineAt: { type: 'integer' },
                  decision: { type: 'object' },
                },
              },
            },
            options: { type: 'object' },
            queued: { type: 'array', items: { type: 'object', properties: { id: { type: 'string' }, text: { type: 'string' }, enqueuedAt: { type: 'integer' } } } },
            cancelRequested: { type: 'boolean' },
            context: { type: ['object', 'null'], description: "the session machine's context (turn, attempt, attempts history, nextRetryAt, mailbox, policy…)" },
          },
        },
        Message: {
          type: 'object',
          required: ['seq', 'turn', 'attempt', 'type', 'content'],
          properties: { seq: { type: 'integer' }, turn: { type: 'integer' }, attempt: { type: 'integer' }, type: { type: 'string' }, content: {} },
        },
        MessagePage: {
          type: 'object',
          required: ['sessionId', 'from', 'messages', 'nextFrom', 'lastSeq'],
          properties: {
            sessionId: { type: 'string' },
            from: { type: 'integer' },
            messages: { type: 'array', items: ref('Message') },
            nextFrom: { type: 'integer' },
            lastSeq: { type: 'integer' },
          },
        },
        RetryPolicy: policy,
        PolicyResponse: { type: 'object', required: ['policy', 'source'], properties: { policy: ref('RetryPolicy'), source: { enum: ['session', 'global', 'default'] } } },
        Chart: {
          type: 'object',
          required: ['id', 'initial', 'states'],
          properties: {
            id: { type: 'string' },
            initial: { type: ['string', 'null'] },
            states: {
              type: 'array',
              items: {
                type: 'object',
                properties: {
                  name: { type: 'string' },
                  invokes: { type: 'array', items: { type: 'string' } },
                  transitions: {
                    type: 'array',
                    items: { type: 'object', properties: { event: { type: 'string' }, target: { type: ['string', 'null'] }, guard: { type: ['string', 'null'] } } },
                  },
                },
              },
            },
          },
        },
      },
    },
  };
}

function html(description: string): Json {
  return { description, content: { 'text/html': { schema: { type: 'string' } } } };
}
