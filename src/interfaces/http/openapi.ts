import { components } from './components.ts';
import { operationOf, type Examples, type Json, type Route } from './route.ts';
import { ALL_ROUTES } from './routes/index.ts';

/**
 * The OpenAPI 3.1 document of the HTTP API, served at `/openapi.json`, assembled from the routes' own
 * declarations (route.ts): each route's path, parameters, body schema (the very zod schema its request is
 * validated with), responses and scope. `test/interfaces/http/api.test.ts` checks that every route the app
 * serves is here and every path here is served, and that the examples are accepted.
 */

const ROUTES: ReadonlyArray<Route<never>> = ALL_ROUTES;

/** Request examples by operationId, each a body the API accepts (tested). */
export const REQUEST_EXAMPLES: Record<string, Examples> = Object.fromEntries(
  ROUTES.flatMap((r) => (r.spec.body === undefined ? [] : [[r.spec.operationId, r.spec.body.examples]])),
);

let cached: Json | null = null;

export function openApiDocument(): Json {
  cached ??= build();
  return cached;
}

function build(): Json {
  const paths: Record<string, Json> = {};
  for (const { spec } of ROUTES) paths[spec.path] = { ...paths[spec.path], [spec.method]: operationOf(spec) };
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
      { name: 'workspaces', description: "a workspace session's turns: undo, fork, diff" },
      { name: 'retry-policy' },
      { name: 'operations' },
      { name: 'auth', description: 'login cookie and stream tickets' },
      { name: 'dashboard', description: 'HTML pages and their static files' },
    ],
    paths,
    components: components(),
  };
}
