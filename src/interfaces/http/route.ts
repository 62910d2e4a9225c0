import type { Context, Hono } from 'hono';
import { z } from 'zod';
import type { NotFoundError } from '../../errors.ts';
import { SESSION_ID_PATTERN } from '../../runtime/keys.ts';
import { unknownSession as unknownSessionError } from '../../runtime/session-reads.ts';
import { SCOPE_KEY, type RouteScope } from './auth/route-scopes.ts';
import { readJson, validate } from './body.ts';

/**
 * One HTTP route, declared in one place: its path, what it takes (query, body), what it answers, the scope it
 * needs, and its handler. `mountRoutes` serves a list of them; `operationOf` is the route's part of the OpenAPI
 * document (openapi.ts assembles the document from every route; the guard's route table is read from the same routes).
 *
 * Before the handler runs, the route checks what it declared: a path with `{id}` takes a session id (a 404
 * `unknown session` when the id cannot be one), then the query, then the JSON body (a 400 naming each bad field).
 */

export type Json = Record<string, unknown>;
export type Method = 'get' | 'post' | 'put' | 'delete';
export type Examples = Record<string, { summary: string; value: unknown }>;

type QueryOf<Q> = Q extends z.ZodType ? z.output<Q> : Record<string, string>;
type BodyOf<B> = B extends z.ZodType ? z.output<B> : undefined;
type IdOf<P extends string> = P extends `${string}{id}${string}`
  ? { /** The session id of the path, checked. */ id: string }
  : object;

/** What a handler is given besides the request: the session id (when the path has one), the parsed query and body. */
export type RouteInput<P extends string, Q, B> = IdOf<P> & { query: QueryOf<Q>; body: BodyOf<B> };

export interface RouteSpec<C, P extends string, Q extends z.ZodType | undefined, B extends z.ZodType | undefined> {
  method: Method;
  /** The OpenAPI path template, e.g. `/api/sessions/{id}`; `{id}` is always a session id. */
  path: P;
  operationId: string;
  tags: string[];
  summary: string;
  description?: string;
  /** What the caller's credential must grant (`public`: none); the guard enforces it. */
  scope: RouteScope;
  /** The route also takes a stream ticket (`?ticket=`): the event stream. */
  streamTicket?: boolean;
  /** `/sessions/{id}` of the dashboard: the page renders any id (no 404 from the server). */
  anyId?: boolean;
  /** The parameters besides the session id (which is documented for every `{id}` path). */
  parameters?: Json[];
  /** Validates the query string; without it the handler gets the raw query. */
  query?: Q;
  body?: {
    /** Validates the JSON body (a 400 naming each bad field); documented as the request body unless `document` is given. */
    schema: B;
    /** Default true. An optional body that is empty is `{}`. */
    required?: boolean;
    /** The documented schema when the handler validates the body itself (the retry policy's patch). */
    document?: Json;
    /** Bodies the API accepts (a test sends each one). */
    examples: Examples;
  };
  /** By status; every route that needs a credential also documents 401 and 403. */
  responses: Record<string, Json>;
  handler: (c: Context, input: RouteInput<P, Q, B>, ctx: C) => Response | Promise<Response>;
}

/** A declared route, its types erased: `run` checks the request and calls the handler. */
export interface Route<C> {
  readonly spec: RouteSpec<C, string, z.ZodType | undefined, z.ZodType | undefined>;
  run(c: Context, ctx: C): Promise<Response>;
}

/** The route definer for handlers given a `C` (createApp's RouteContext; the dashboard's assets). */
export function routeFor<C>() {
  return function defineRoute<
    const P extends string,
    Q extends z.ZodType | undefined = undefined,
    B extends z.ZodType | undefined = undefined,
  >(spec: RouteSpec<C, P, Q, B>): Route<C> {
    const checksId = spec.path.includes('{id}') && spec.anyId !== true;
    return {
      spec: spec as unknown as Route<C>['spec'],
      async run(c, ctx) {
        const id = c.req.param('id') ?? '';
        if (checksId && !SESSION_ID_PATTERN.test(id)) throw unknownSession(id);
        const query = spec.query === undefined ? c.req.query() : validate(spec.query, c.req.query());
        let body: unknown;
        if (spec.body !== undefined) {
          const raw = await readJson(c);
          body = validate(spec.body.schema as z.ZodType, spec.body.required === false ? (raw ?? {}) : raw);
        }
        return spec.handler(c, { id, query, body } as unknown as RouteInput<P, Q, B>, ctx);
      },
    };
  };
}

/** A query parameter that is an integer from `min` to `max` (a 400 naming it otherwise). */
export const queryInt = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d+$/, `must be an integer from ${min} to ${max}`)
    .transform(Number)
    .pipe(
      z
        .number()
        .int()
        .min(min, `must be an integer from ${min} to ${max}`)
        .max(max, `must be an integer from ${min} to ${max}`),
    );

export function unknownSession(id: string): NotFoundError {
  return unknownSessionError(id);
}

/** Serves `routes` on `app` in their order (`{name}` → `:name`). */
export function mountRoutes<C>(app: Hono, routes: readonly Route<C>[], ctx: C): void {
  for (const route of routes) {
    const path = route.spec.path.replace(/\{([A-Za-z0-9_]+)\}/g, ':$1');
    app.on(route.spec.method.toUpperCase(), path, (c) => route.run(c, ctx));
  }
}

// ---- the OpenAPI side ----------------------------------------------------------------------

export const ref = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });
export const json = (schema: Json, description: string): Json => ({
  description,
  content: { 'application/json': { schema } },
});
export const error = (description: string): Json => json(ref('Error'), description);
export const invalid = (description = 'a field is invalid: `issues` name each one'): Json =>
  json(ref('ValidationError'), description);
export const html = (description: string): Json => ({
  description,
  content: { 'text/html': { schema: { type: 'string' } } },
});
/** What a route with a body may also answer: no credential, scope or origin refused, body too large, not JSON. */
export const MUTATING_ERRORS = {
  '401': error(
    'a token is configured and the request has no valid credential (`Authorization: Bearer <token>` or the login cookie)',
  ),
  '403': error("the token's scope does not cover this route, or a cross-origin request (`Origin` not allowed)"),
  '413': error('the body is larger than `http.bodyLimitBytes`'),
  '415': error('a body not sent as `application/json`'),
};

/** The `{id}` parameter of every session path. */
export const ID_PARAM = {
  name: 'id',
  in: 'path',
  required: true,
  description: 'Session id (1-100 letters, digits or _.-, not . or ..)',
  schema: { type: 'string', pattern: SESSION_ID_PATTERN.source },
};

/** A zod schema as JSON Schema, without `$schema` and zod's `readOnly` markers (readonly arrays), which mean something else in OpenAPI. */
export function schemaOf(schema: z.ZodType, io: 'input' | 'output' = 'input'): Json {
  return strip(z.toJSONSchema(schema, { io, unrepresentable: 'any' })) as Json;
}

function strip(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(strip);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([k]) => k !== '$schema' && k !== 'readOnly')
      .map(([k, v]) => [k, strip(v)]),
  );
}

/** The route's operation in the OpenAPI document. */
export function operationOf(spec: Route<never>['spec']): Json {
  const parameters = [...(spec.path.includes('{id}') ? [ID_PARAM] : []), ...(spec.parameters ?? [])];
  const security =
    spec.scope === 'public'
      ? []
      : [{ bearerAuth: [] }, { loginCookie: [] }, ...(spec.streamTicket === true ? [{ streamTicket: [] }] : [])];
  const responses: Json = { ...spec.responses };
  if (spec.scope !== 'public') {
    responses['401'] ??= error('a token is configured and the request has no valid credential');
    responses['403'] ??= error("the credential's scope does not cover this route");
  }
  return {
    operationId: spec.operationId,
    tags: spec.tags,
    summary: spec.summary,
    ...(spec.description === undefined ? {} : { description: spec.description }),
    [SCOPE_KEY]: spec.scope,
    security,
    ...(parameters.length === 0 ? {} : { parameters }),
    ...(spec.body === undefined
      ? {}
      : {
          requestBody: {
            required: spec.body.required !== false,
            content: {
              'application/json': {
                schema: spec.body.document ?? schemaOf(spec.body.schema as z.ZodType),
                examples: spec.body.examples,
              },
            },
          },
        }),
    responses,
  };
}
