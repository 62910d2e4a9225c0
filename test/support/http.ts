import { pino } from 'pino';
import { clientOver } from '../../src/api/bind.ts';
import { loadConfig, type Config } from '../../src/config/config.ts';
import { startServer, type RunningServer } from '../../src/interfaces/http/server.ts';
import type { Runtime } from '../../src/runtime/runtime.ts';

/** The default config of deployment `prefix` (no environment read), with `http` laid over its http section. */
export function httpConfig(prefix: string, http: Record<string, unknown>): Config {
  const base = loadConfig({ prefix }, {});
  return { ...base, http: { ...base.http, ...http } as Config['http'] };
}

/** The real HTTP server over `runtime` on a free loopback port: a silent logger, no Bull Board, no dashboard. */
export function serveApi(runtime: Runtime, config: Config): Promise<RunningServer> {
  return startServer({
    client: clientOver(runtime),
    config,
    logger: pino({ level: 'silent' }),
    port: 0,
    bullBoard: false,
    dashboard: false,
  });
}

/** POST `body` as JSON with `token` as the bearer: the status and the JSON answer. */
export async function postJson(
  server: RunningServer,
  path: string,
  token: string,
  body: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const r = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  });
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
}
