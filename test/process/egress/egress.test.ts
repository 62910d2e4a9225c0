import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, request, type IncomingHttpHeaders, type Server } from 'node:http';
import { connect, createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execa } from 'execa';
import {
  MODEL_BRIDGE,
  openAttemptEgress,
  PLACEHOLDER_KEY,
  PROXY_BRIDGE,
  type AttemptEgress,
  type AttemptRefusal,
} from '../../../src/process/egress/index.ts';
import { startForwardProxy } from '../../../src/process/egress/forward-proxy.ts';
import { openHostBridges } from '../../../src/process/sandbox/host-bridges.ts';
import { hostPattern as pattern } from '../../support/egress.ts';

/** A loopback HTTP server that records what it was sent. */
/**
 * Test servers listen on 127.0.0.2 (allowed) and 127.0.0.3 (denied): the agent reaches its model
 * bridge on 127.0.0.1, which NO_PROXY keeps direct; every other address goes through the proxy.
 */
async function recordingServer(
  address: string,
): Promise<{ port: number; seen: Array<{ url: string; headers: IncomingHttpHeaders }>; server: Server }> {
  const seen: Array<{ url: string; headers: IncomingHttpHeaders }> = [];
  const server = createServer((req, res) => {
    seen.push({ url: req.url ?? '', headers: req.headers });
    res.end(`hello from ${req.url ?? ''}`);
  });
  await new Promise<void>((r) => server.listen(0, address, r));
  return { port: (server.address() as AddressInfo).port, seen, server };
}

let allowed: Awaited<ReturnType<typeof recordingServer>>;
let denied: Awaited<ReturnType<typeof recordingServer>>;
let model: Awaited<ReturnType<typeof recordingServer>>;
beforeAll(async () => {
  [allowed, denied, model] = await Promise.all([
    recordingServer('127.0.0.2'),
    recordingServer('127.0.0.3'),
    recordingServer('127.0.0.1'),
  ]);
});
afterAll(() => {
  for (const s of [allowed, denied, model]) s.server.close();
});

/** The egress as an agent without a sandbox reaches it: loopback ports relaying to its sockets (the sandbox's host bridges). */
async function reach(
  egress: AttemptEgress,
): Promise<{ env: Record<string, string>; modelBaseUrl: string | null; close: () => Promise<void> }> {
  const bridges = await openHostBridges(egress.bridges);
  return { ...egress.reached(bridges.urls), close: () => bridges.close() };
}

function socketOf(egress: AttemptEgress, name: string): string {
  const bridge = egress.bridges.find((b) => b.name === name);
  if (bridge === undefined) throw new Error(`no bridge ${name}`);
  return bridge.socket;
}

async function curl(args: string[], env: Record<string, string>): Promise<{ code: string; body: string }> {
  const out = await execa('curl', ['-sS', '-o', '-', '-w', '\n%{http_code}', '--max-time', '10', ...args], {
    env,
    extendEnv: false,
    reject: false,
  });
  const lines = out.stdout.split('\n');
  return { code: lines.at(-1) ?? '', body: lines.slice(0, -1).join('\n') };
}

describe('an attempt egress (forward proxy + model bridge, on real sockets)', () => {
  it('lets a tool reach an allowed host, refuses and reports every other host, and carries the real key to the model host only', async () => {
    const refusals: AttemptRefusal[] = [];
    const egress = await openAttemptEgress(
      {
        sessionId: 's-1',
        turn: 2,
        attempt: 3,
        allow: [pattern(`127.0.0.2:${allowed.port}`)],
        onRefused: (r) => refusals.push(r),
      },
      { baseUrl: new URL(`http://127.0.0.1:${model.port}/v1`), key: 'sk-real-secret' },
    );
    const reached = await reach(egress);
    try {
      const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', ...reached.env };
      // http through the proxy (absolute-URI form), allowed
      expect(await curl([`http://127.0.0.2:${allowed.port}/ok`], env)).toEqual({ code: '200', body: 'hello from /ok' });
      // denied: another loopback port (think Redis or sessiond's API)
      const refused = await curl([`http://127.0.0.3:${denied.port}/secret`], env);
      expect(refused.code).toBe('403');
      expect(denied.seen).toHaveLength(0);
      // a CONNECT tunnel to a denied host: curl reports the proxy's 403
      const tunnel = await curl(['--proxytunnel', `http://127.0.0.3:${denied.port}/x`], env);
      expect(tunnel.code).not.toBe('200');
      expect(refusals).toEqual([
        {
          host: '127.0.0.3',
          port: denied.port,
          method: 'GET',
          reason: 'not allowed',
          sessionId: 's-1',
          turn: 2,
          attempt: 3,
        },
        {
          host: '127.0.0.3',
          port: denied.port,
          method: 'CONNECT',
          reason: 'not allowed',
          sessionId: 's-1',
          turn: 2,
          attempt: 3,
        },
      ]);
      // the model bridge: the agent's placeholder becomes the real key, on the model host's path
      expect(reached.modelBaseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
      const viaBridge = await curl(
        ['-H', `Authorization: Bearer ${PLACEHOLDER_KEY}`, `${reached.modelBaseUrl}/chat/completions`],
        env,
      );
      expect(viaBridge).toEqual({ code: '200', body: 'hello from /v1/chat/completions' });
      expect(model.seen.at(-1)?.headers.authorization).toBe('Bearer sk-real-secret');
      // a key header with anything but the placeholder is dropped, not passed on
      await curl(['-H', 'x-api-key: stolen-elsewhere', `${reached.modelBaseUrl}/m`], env);
      expect(model.seen.at(-1)?.headers['x-api-key']).toBeUndefined();
      // the key never went to the allowed host
      expect(JSON.stringify(allowed.seen)).not.toContain('sk-real-secret');
    } finally {
      await reached.close();
      await egress.close();
    }
    expect(existsSync(socketOf(egress, PROXY_BRIDGE))).toBe(false);
    expect(existsSync(socketOf(egress, MODEL_BRIDGE))).toBe(false);
  });

  it('a CONNECT tunnel to an allowed host carries bytes both ways', async () => {
    const echo = createTcpServer((s) => s.pipe(s));
    await new Promise<void>((r) => echo.listen(0, '127.0.0.2', r));
    const port = (echo.address() as AddressInfo).port;
    const egress = await openAttemptEgress({ sessionId: 's', allow: [pattern(`127.0.0.2:${port}`)] }, null);
    try {
      const reply = await new Promise<string>((resolve, reject) => {
        const req = request({
          socketPath: socketOf(egress, PROXY_BRIDGE),
          method: 'CONNECT',
          path: `127.0.0.2:${port}`,
        });
        req.on('connect', (res, socket) => {
          expect(res.statusCode).toBe(200);
          socket.once('data', (d: Buffer) => {
            resolve(d.toString());
            socket.destroy();
          });
          socket.write('ping');
        });
        req.on('error', reject);
        req.end();
      });
      expect(reply).toBe('ping');
    } finally {
      await egress.close();
      echo.close();
    }
  });

  it('an allowed host *name* that resolves to the worker loopback is refused (no way to Redis or the API by DNS)', async () => {
    const refusals: AttemptRefusal[] = [];
    const egress = await openAttemptEgress(
      { sessionId: 's', allow: [pattern(`localhost:${allowed.port}`)], onRefused: (r) => refusals.push(r) },
      null,
    );
    const reached = await reach(egress);
    try {
      // (curl -x: the proxy for this one request, whatever NO_PROXY says of localhost)
      const out = await curl(['--noproxy', '', '-x', reached.env.HTTP_PROXY!, `http://localhost:${allowed.port}/x`], {
        PATH: process.env.PATH ?? '',
      });
      expect(out.code).toBe('403');
      expect(refusals.map((r) => r.reason)).toEqual(['local address']);
    } finally {
      await reached.close();
      await egress.close();
    }
  });

  it('close() ends open tunnels: nothing of the attempt stays connected', async () => {
    const echo = createTcpServer((s) => s.pipe(s));
    await new Promise<void>((r) => echo.listen(0, '127.0.0.2', r));
    const port = (echo.address() as AddressInfo).port;
    const egress = await openAttemptEgress({ sessionId: 's', allow: [pattern(`127.0.0.2:${port}`)] }, null);
    const socket = await new Promise<Socket>((resolve, reject) => {
      const req = request({ socketPath: socketOf(egress, PROXY_BRIDGE), method: 'CONNECT', path: `127.0.0.2:${port}` });
      req.on('connect', (_res, s) => resolve(s));
      req.on('error', reject);
      req.end();
    });
    const closed = new Promise<void>((r) => socket.once('close', () => r()));
    await egress.close();
    await closed;
    const connections = await new Promise<number>((r) => echo.getConnections((_e, n) => r(n)));
    echo.close();
    // the upstream side was ended with the client side
    await expect.poll(() => new Promise<number>((r) => echo.getConnections((_e, n) => r(n)))).toBe(0);
    expect(connections).toBeLessThanOrEqual(1);
    // and the proxy no longer listens
    await expect(
      new Promise((resolve, reject) =>
        connect(socketOf(egress, PROXY_BRIDGE)).on('connect', resolve).on('error', reject),
      ),
    ).rejects.toThrow();
  });
});

describe('bounds', () => {
  it('the proxy holds at most maxConnections client connections: one more is closed at once', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'egress-bounds-'));
    const proxy = await startForwardProxy({
      socketPath: join(dir, 'p.sock'),
      allow: [],
      onRefused: () => undefined,
      maxConnections: 2,
    });
    const open = await Promise.all(
      [0, 1].map(
        () =>
          new Promise<Socket>((resolve) => {
            const s = connect(join(dir, 'p.sock'), () => resolve(s));
          }),
      ),
    );
    const third = connect(join(dir, 'p.sock'));
    await new Promise<void>((resolve) => third.once('close', () => resolve()));
    expect(open.every((s) => !s.destroyed)).toBe(true);
    for (const s of open) s.destroy();
    await proxy.close();
    rmSync(dir, { recursive: true, force: true });
  });
});
