import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis } from '../../../src/runtime/redis/connection.ts';
import { ensureLocalRedis, isRedisServerProcess, type LocalRedis } from '../../../src/runtime/redis/local-server.ts';
import { pingRedis } from '../../../src/runtime/redis/probe.ts';
import { freePort, killWithTestProcess, startRedis } from '../../support/redis.ts';

type Running = Extract<LocalRedis, { url: string }>;

/** The server, which dies with this test process even if the test never reaches stop(). */
function running(result: LocalRedis): Running {
  if ('error' in result) throw new Error(result.error);
  if (result.pid !== undefined) killWithTestProcess(result.pid);
  return result;
}

let root: string;
const toStop: Running[] = [];

beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'sessiond-local-redis-'));
});
afterAll(async () => {
  for (const server of toStop) await server.stop?.();
  await rm(root, { recursive: true, force: true });
});

describe('ensureLocalRedis', () => {
  it('starts redis-server with AOF in a new data dir; a second call reuses it; stop ends it', async () => {
    const port = await freePort();
    const dataDir = path.join(root, 'a', 'nested', 'data');
    const t0 = performance.now();
    const first = running(await ensureLocalRedis({ dataDir, port }));
    const startupMs = performance.now() - t0;
    toStop.push(first);
    expect(first).toMatchObject({ url: `redis://127.0.0.1:${port}`, started: true });
    expect(first.stop).toBeTypeOf('function');
    expect(startupMs).toBeLessThan(5000);
    const pid = first.pid ?? -1;
    expect(isRedisServerProcess(pid)).toBe(true);
    expect(Number(readFileSync(path.join(dataDir, 'redis.pid'), 'utf8').trim())).toBe(pid);

    const redis = createRedis(first.url, { role: 'local-test' });
    try {
      expect(await redis.config('GET', 'appendonly')).toEqual(['appendonly', 'yes']);
      expect(await redis.config('GET', 'bind')).toEqual(['bind', '127.0.0.1']);
      expect(await redis.config('GET', 'dir')).toEqual(['dir', dataDir]);
      await redis.set('k', 'v');
    } finally {
      redis.disconnect();
    }

    const second = running(await ensureLocalRedis({ dataDir, port }));
    expect(second).toMatchObject({ url: first.url, started: false, pid });
    expect(second.stop).toBeTypeOf('function');

    await first.stop?.();
    expect(isRedisServerProcess(pid)).toBe(false);
    expect((await pingRedis({ port })).status).toBe('refused');
    expect(existsSync(path.join(dataDir, 'appendonlydir'))).toBe(true);
    expect(existsSync(path.join(dataDir, 'redis.pid'))).toBe(false);

    // Started again on the same data dir: the AOF brings the data back.
    const third = running(await ensureLocalRedis({ dataDir, port }));
    toStop.push(third);
    expect(third.started).toBe(true);
    const again = createRedis(third.url, { role: 'local-test' });
    try {
      expect(await again.get('k')).toBe('v');
    } finally {
      again.disconnect();
    }
    await third.stop?.();
  });

  it('reuses a server it did not start, without offering to stop it', async () => {
    const server = await startRedis();
    try {
      const result = running(await ensureLocalRedis({ dataDir: path.join(root, 'other'), port: server.port }));
      expect(result).toEqual({ url: `redis://127.0.0.1:${server.port}`, started: false });
      expect(existsSync(path.join(root, 'other'))).toBe(false);
    } finally {
      await server.stop();
    }
  });

  it('without redis-server on PATH, says how to get a Redis', async () => {
    const port = await freePort();
    const result = await ensureLocalRedis({ dataDir: path.join(root, 'missing'), port, pathEnv: '/nonexistent' });
    expect(result).toHaveProperty('error');
    const { error } = result as { error: string };
    expect(error).toContain(`127.0.0.1:${port}`);
    expect(error).toContain('apt-get install redis-server');
    expect(error).toContain('brew install redis');
    expect(error).toContain('docker compose up -d redis');
    expect(error).toContain('REDIS_URL');
  });

  it('a password-protected Redis on the port: asks for REDIS_URL', async () => {
    const server = await startRedis({ password: 'secret-pw' });
    try {
      const result = await ensureLocalRedis({ dataDir: path.join(root, 'pw'), port: server.port });
      expect(result).toEqual({
        error: expect.stringMatching(/requires a password: set REDIS_URL=redis:\/\/:PASSWORD@/),
      });
    } finally {
      await server.stop();
    }
  });

  it('something that is not Redis on the port: an error, nothing started', async () => {
    const impostor = net.createServer((socket) => {
      socket.resume(); // read (and drop) the request, so the client's FIN is seen and close() can finish
      socket.end('HTTP/1.1 400 Bad Request\r\n\r\n');
    });
    await new Promise<void>((resolve) => impostor.listen(0, '127.0.0.1', resolve));
    const port = (impostor.address() as net.AddressInfo).port;
    try {
      const result = await ensureLocalRedis({ dataDir: path.join(root, 'impostor'), port });
      expect(result).toEqual({ error: expect.stringMatching(/is in use by something that is not Redis/) });
    } finally {
      await new Promise((resolve) => impostor.close(resolve));
    }
  });

  it('rejects an invalid port', async () => {
    expect(await ensureLocalRedis({ dataDir: path.join(root, 'x'), port: 70000 })).toEqual({
      error: expect.stringMatching(/invalid port/),
    });
  });
});
