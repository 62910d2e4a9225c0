import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientOver } from '../../../src/api/bind.ts';
import { SCOPE_KEY } from '../../../src/interfaces/http/auth/route-scopes.ts';
import { mountRoutes, operationOf, type Route } from '../../../src/interfaces/http/route.ts';
import type { RouteContext } from '../../../src/interfaces/http/routes/context.ts';
import { Runtime } from '../../../src/runtime/runtime.ts';
import { startRedis, uniquePrefix, type RedisServer } from '../../support/redis.ts';
import { connector } from '../../support/runtime.ts';
import { HttpError } from '../../../src/interfaces/http/body.ts';
import { hasErrorCode } from '../../../src/errors.ts';

/** docs/recipes/add-a-route.md: the route file it shows, served as written there (its imports pointed at src/). */
const RECIPE = readFileSync('docs/recipes/add-a-route.md', 'utf8');
const ROUTES_DIR = resolve('src/interfaces/http/routes');

function recipeFile(): string {
  const block = /`src\/interfaces\/http\/routes\/last-seq\.ts`\s*```ts\n([\s\S]*?)```/.exec(RECIPE)?.[1];
  if (block === undefined) throw new Error('the recipe has no route file block');
  return block.replace(
    /from '(\.{1,2}\/[^']+)'/g,
    (_, path: string) => `from '${pathToFileURL(resolve(ROUTES_DIR, path)).href}'`,
  );
}

let redis: RedisServer;
let runtime: Runtime;
let closeAll: () => void;
let dir: string;
let app: Hono;
let routes: Array<Route<RouteContext>>;

beforeAll(async () => {
  redis = await startRedis();
  const c = connector(redis.url);
  closeAll = c.closeAll;
  runtime = new Runtime({ connect: c.connect, prefix: uniquePrefix('recipe') });
  dir = mkdtempSync(join(tmpdir(), 'sessiond-recipe-'));
  const file = join(dir, 'last-seq.ts');
  writeFileSync(file, recipeFile());
  ({ lastSeqRoutes: routes } = (await import(pathToFileURL(file).href)) as {
    lastSeqRoutes: Array<Route<RouteContext>>;
  });
  app = new Hono();
  // What createApp does with errors (app.ts), for the 404 the route throws.
  app.onError((error, c) =>
    error instanceof HttpError
      ? c.json({ error: error.message }, error.status)
      : hasErrorCode(error, 'not_found')
        ? c.json({ error: error.message, code: error.code }, 404)
        : c.json({ error: 'internal error' }, 500),
  );
  // The recipe's handler uses only the client.
  mountRoutes(app, routes, { client: clientOver(runtime) } as RouteContext);
});

afterAll(async () => {
  await runtime.close();
  closeAll();
  await redis.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('the add-a-route recipe', () => {
  it('its route is documented with its path, the session id and its scope', () => {
    const op = operationOf(routes[0]?.spec as Route<never>['spec']);
    expect(op).toMatchObject({
      operationId: 'getLastSeq',
      [SCOPE_KEY]: 'read',
      parameters: [{ name: 'id', in: 'path' }],
    });
    expect(Object.keys(op.responses as object).sort()).toEqual(['200', '401', '403', '404']);
  });

  it('serves a session’s last seq, 404 for an unknown session and for an id that cannot be one', async () => {
    const { sessionId } = await clientOver(runtime).sessions.enqueue({
      prompt: 'hello',
      options: { provider: 'fake', model: 'text' },
    });
    const found = await app.request(`/api/sessions/${sessionId}/last-seq`);
    expect(found.status).toBe(200);
    expect(await found.json()).toEqual({ sessionId, lastSeq: await runtime.lastSeq(sessionId) });
    const unknown = await app.request('/api/sessions/no-such-session/last-seq');
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({ error: 'unknown session "no-such-session"', code: 'not_found' });
    const malformed = await app.request('/api/sessions/bad%20id/last-seq');
    expect(malformed.status).toBe(404);
  });
});
