import { createHash } from 'node:crypto';
import { request as httpRequest, createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig, type Config } from '../../../src/config/config.ts';
import { createApp } from '../../../src/interfaces/http/app.ts';
import { startServer, type RunningServer } from '../../../src/interfaces/http/server.ts';
import { DEFAULT_RETRY_POLICY } from '../../../src/retry/index.ts';
import { useRuntimeSuite, type Harness } from '../../support/runtime.ts';
import { clientOver } from '../../../src/api/bind.ts';

/**
 * DNS rebinding and origins on every binding, and the two ways a reverse proxy
 * is set up: keeping the public Host (→ `allowedHosts`) or rewriting it to the
 * upstream's address (→ `allowedOrigins`). The proxy here is a real one, on 127.0.0.1.
 */

const ADMIN = 'admin-token-0123456789abcdef';
const PUBLIC_HOST = 'sessiond.example.com';
const PUBLIC_ORIGIN = `https://${PUBLIC_HOST}`;

let h: Harness;
const servers: RunningServer[] = [];
const proxies: Server[] = [];
useRuntimeSuite(
  'http-hosts',
  {
    cleanup: async () => {
      await Promise.all(servers.map((s) => s.close(500)));
      await Promise.all(proxies.map((p) => new Promise((resolve) => p.close(resolve))));
    },
  },
  (s) => {
    ({ h } = s);
  },
);

const quiet = () => pino({ level: 'silent' });

function configFor(http: Record<string, unknown>): Config {
  const base = loadConfig({ prefix: h.prefix }, {});
  return { ...base, http: { ...base.http, ...http } as Config['http'] };
}

interface Reply {
  status: number;
  body: string;
}

/** An HTTP request with any Host header (fetch cannot set one), to 127.0.0.1 only. */
function raw(
  port: number,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: unknown,
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        headers: {
          ...headers,
          ...(data === undefined
            ? {}
            : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(data)) }),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

/** A reverse proxy on 127.0.0.1 in front of `upstream`: forwards Host as it came (keep) or as the upstream's address (rewrite). */
async function proxy(upstream: RunningServer, mode: 'keep' | 'rewrite'): Promise<number> {
  const server = createServer((req, res) => {
    const headers = {
      ...req.headers,
      host: mode === 'keep' ? req.headers.host : `127.0.0.1:${upstream.port}`,
      'x-forwarded-proto': 'https',
    };
    const out = httpRequest(
      { host: '127.0.0.1', port: upstream.port, method: req.method, path: req.url, headers },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    out.on('error', () => res.destroy());
    req.pipe(out);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  proxies.push(server);
  return (server.address() as AddressInfo).port;
}

async function serve(http: Record<string, unknown>): Promise<RunningServer> {
  const server = await startServer({
    client: clientOver(h.runtime),
    config: configFor(http),
    logger: quiet(),
    port: 0,
    bullBoard: false,
  });
  servers.push(server);
  return server;
}

const policyUnchanged = async () =>
  expect((await h.runtime.getPolicy()).policy.maxAttempts).toBe(DEFAULT_RETRY_POLICY.maxAttempts);

describe('Host check (DNS rebinding) on every binding', () => {
  it('loopback: a foreign Host is 421 (rebind.attacker.example gets no data); localhost and 127.0.0.1 work', async () => {
    const server = await serve({});
    const rebound = await raw(server.port, 'GET', '/api/sessions', { host: 'rebind.attacker.example' });
    expect(rebound.status).toBe(421);
    expect(rebound.body).not.toContain('sessions"');
    expect((await raw(server.port, 'GET', '/api/sessions', { host: `localhost:${server.port}` })).status).toBe(200);
    expect((await raw(server.port, 'GET', '/api/sessions', { host: `127.0.0.1:${server.port}` })).status).toBe(200);
  });

  it('off loopback: a foreign Host is 421 even with an admin token; the bound address and localhost work', async () => {
    const app = createApp({
      client: clientOver(h.runtime),
      config: configFor({ host: '0.0.0.0', token: ADMIN }),
      logger: quiet(),
      bullBoard: false,
    });
    const auth = { authorization: `Bearer ${ADMIN}` };
    expect(
      (
        await app.request('http://rebind.attacker.example/api/sessions', {
          headers: { host: 'rebind.attacker.example', ...auth },
        })
      ).status,
    ).toBe(421);
    expect(
      (await app.request('http://localhost:7420/api/sessions', { headers: { host: 'localhost:7420', ...auth } }))
        .status,
    ).toBe(200);
    const bound = createApp({
      client: clientOver(h.runtime),
      config: configFor({ host: '10.1.2.3', token: ADMIN }),
      logger: quiet(),
      bullBoard: false,
    });
    expect(
      (await bound.request('http://10.1.2.3:7420/api/sessions', { headers: { host: '10.1.2.3:7420', ...auth } }))
        .status,
    ).toBe(200);
    expect(
      (await bound.request('http://evil.example/api/sessions', { headers: { host: 'evil.example:7420', ...auth } }))
        .status,
    ).toBe(421);
  });

  it("a foreign Origin on a mutation is 403 and writes nothing; the page's own origin and an allowed origin work", async () => {
    const server = await serve({ allowedOrigins: ['https://ops.example.org'] });
    const host = `127.0.0.1:${server.port}`;
    for (const origin of ['http://evil.example', 'null', `http://${host}.evil.example`]) {
      expect(
        (await raw(server.port, 'PUT', '/api/retry-policy', { host, origin }, { maxAttempts: 9 })).status,
        origin,
      ).toBe(403);
    }
    await policyUnchanged();
    expect(
      (await raw(server.port, 'PUT', '/api/retry-policy', { host, origin: `http://${host}` }, { maxAttempts: 5 }))
        .status,
    ).toBe(200);
    expect(
      (
        await raw(
          server.port,
          'PUT',
          '/api/retry-policy',
          { host, origin: 'https://ops.example.org' },
          { maxAttempts: 6 },
        )
      ).status,
    ).toBe(200);
    expect((await raw(server.port, 'DELETE', '/api/retry-policy', { host })).status).toBe(200);
  });
});

describe('behind a reverse proxy', () => {
  it('a proxy that keeps the public Host: 421 until allowedHosts names it; then reads and same-origin writes work', async () => {
    const sha256 = createHash('sha256').update(ADMIN).digest('hex');
    const bare = await proxy(await serve({ tokens: [{ name: 'ops', scope: 'admin', sha256 }] }), 'keep');
    const auth = { host: PUBLIC_HOST, authorization: `Bearer ${ADMIN}` };
    expect((await raw(bare, 'GET', '/api/sessions', auth)).status).toBe(421);

    const port = await proxy(
      await serve({ tokens: [{ name: 'ops', scope: 'admin', sha256 }], allowedHosts: [PUBLIC_HOST] }),
      'keep',
    );
    expect((await raw(port, 'GET', '/api/sessions', auth)).status).toBe(200);
    expect(
      (await raw(port, 'PUT', '/api/retry-policy', { ...auth, origin: PUBLIC_ORIGIN }, { maxAttempts: 5 })).status,
    ).toBe(200);
    expect(
      (await raw(port, 'PUT', '/api/retry-policy', { ...auth, origin: 'https://evil.example' }, { maxAttempts: 9 }))
        .status,
    ).toBe(403);
    expect((await raw(port, 'DELETE', '/api/retry-policy', { ...auth, origin: PUBLIC_ORIGIN })).status).toBe(200);
    // The dashboard's login through the proxy: the cookie is Secure (the proxy speaks HTTPS), and it works for a write from the page.
    const login = await new Promise<{ status: number; cookie: string }>((resolve, reject) => {
      const data = JSON.stringify({ token: ADMIN });
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/api/login',
          headers: {
            host: PUBLIC_HOST,
            origin: PUBLIC_ORIGIN,
            'content-type': 'application/json',
            'content-length': String(data.length),
          },
        },
        (res) => {
          res.resume();
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, cookie: String(res.headers['set-cookie'] ?? '') }),
          );
        },
      );
      req.on('error', reject);
      req.end(data);
    });
    expect(login.status).toBe(200);
    expect(login.cookie).toMatch(/HttpOnly/);
    expect(login.cookie).toMatch(/SameSite=Strict/);
    expect(login.cookie).toMatch(/Secure/);
    const cookie = login.cookie.split(';')[0] ?? '';
    expect(
      (
        await raw(
          port,
          'PUT',
          '/api/retry-policy',
          { host: PUBLIC_HOST, origin: PUBLIC_ORIGIN, cookie },
          { maxAttempts: 5 },
        )
      ).status,
    ).toBe(200);
    expect(
      (await raw(port, 'DELETE', '/api/retry-policy', { host: PUBLIC_HOST, origin: PUBLIC_ORIGIN, cookie })).status,
    ).toBe(200);
  });

  it('a proxy that rewrites Host to the upstream: writes from the public page are 403 until allowedOrigins names it', async () => {
    const sha256 = createHash('sha256').update(ADMIN).digest('hex');
    const bare = await proxy(await serve({ tokens: [{ name: 'ops', scope: 'admin', sha256 }] }), 'rewrite');
    const auth = { host: PUBLIC_HOST, origin: PUBLIC_ORIGIN, authorization: `Bearer ${ADMIN}` };
    expect((await raw(bare, 'GET', '/api/sessions', auth)).status).toBe(200);
    expect((await raw(bare, 'PUT', '/api/retry-policy', auth, { maxAttempts: 9 })).status).toBe(403);
    await policyUnchanged();

    const port = await proxy(
      await serve({ tokens: [{ name: 'ops', scope: 'admin', sha256 }], allowedOrigins: [PUBLIC_ORIGIN] }),
      'rewrite',
    );
    expect((await raw(port, 'PUT', '/api/retry-policy', auth, { maxAttempts: 5 })).status).toBe(200);
    expect(
      (await raw(port, 'PUT', '/api/retry-policy', { ...auth, origin: 'https://evil.example' }, { maxAttempts: 9 }))
        .status,
    ).toBe(403);
    expect((await raw(port, 'DELETE', '/api/retry-policy', auth)).status).toBe(200);
  });

  it('allowedHosts and allowedOrigins come from the environment too, and a bad one names the field', () => {
    const config = loadConfig(
      {},
      {
        SESSIOND_ALLOWED_HOSTS: 'sessiond.example.com, Other.Example',
        SESSIOND_ALLOWED_ORIGINS: 'https://sessiond.example.com',
      },
    );
    expect(config.http.allowedHosts).toEqual(['sessiond.example.com', 'other.example']);
    expect(config.http.allowedOrigins).toEqual(['https://sessiond.example.com']);
    expect(() => loadConfig({}, { SESSIOND_ALLOWED_ORIGINS: 'sessiond.example.com' })).toThrow(
      /http\.allowedOrigins\.0: must be an origin.*\(env SESSIOND_ALLOWED_ORIGINS\)/,
    );
    expect(() => loadConfig({}, { SESSIOND_ALLOWED_HOSTS: 'https://x/' })).toThrow(
      /http\.allowedHosts\.0: must be a host name/,
    );
  });
});
