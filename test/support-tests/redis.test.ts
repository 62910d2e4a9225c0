import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { isRedisServerProcess } from '../../src/runtime/redis/local-server.ts';
import { pingRedis } from '../../src/runtime/redis/probe.ts';
import { startRedis, uniquePrefix, type RedisServer } from '../support/redis.ts';

const execFileAsync = promisify(execFile);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

const clients: Redis[] = [];
function client(url: string, options: { commandTimeout?: number } = {}): Redis {
  const redis = new Redis(url, { maxRetriesPerRequest: 1, ...options });
  redis.on('error', () => {});
  clients.push(redis);
  return redis;
}

async function waitUntil(check: () => boolean, timeoutMs = 5000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (check()) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return check();
}

afterEach(() => {
  for (const redis of clients.splice(0)) redis.disconnect();
});

describe('startRedis', () => {
  let server: RedisServer;
  let startupMs = 0;

  beforeAll(async () => {
    const t0 = performance.now();
    server = await startRedis({ aof: true });
    startupMs = performance.now() - t0;
  });
  afterAll(async () => {
    await server.stop();
  });

  it('answers PING on a free port of 127.0.0.1, in a fresh dir, with AOF on', async () => {
    expect(server.url).toBe(`redis://127.0.0.1:${server.port}`);
    expect(server.port).toBeGreaterThan(0);
    expect(existsSync(server.dir)).toBe(true);
    expect(isRedisServerProcess(server.pid)).toBe(true);
    expect(startupMs).toBeLessThan(5000);
    const redis = client(server.url);
    expect(await redis.ping()).toBe('PONG');
    expect(await redis.config('GET', 'appendonly')).toEqual(['appendonly', 'yes']);
    expect(await redis.config('GET', 'appendfsync')).toEqual(['appendfsync', 'always']);
    expect(await redis.config('GET', 'save')).toEqual(['save', '']);
    expect(await redis.config('GET', 'bind')).toEqual(['bind', '127.0.0.1']);
    expect(await redis.config('GET', 'dir')).toEqual(['dir', server.dir]);
  });

  it('restart keeps the AOF data, on the same port, with a new process', async () => {
    const key = `${uniquePrefix('restart')}:k`;
    const redis = client(server.url);
    await redis.set(key, 'kept');
    const oldPid = server.pid;
    await server.restart();
    expect(server.pid).not.toBe(oldPid);
    expect(isRedisServerProcess(oldPid)).toBe(false);
    expect(await client(server.url).get(key)).toBe('kept');
  });

  it('kill (SIGKILL) then restart keeps every acknowledged write (appendfsync always)', async () => {
    const key = `${uniquePrefix('kill')}:k`;
    const redis = client(server.url);
    for (let i = 0; i < 50; i++) await redis.rpush(key, String(i));
    await server.kill();
    expect((await pingRedis({ port: server.port })).status).toBe('refused');
    await server.restart();
    expect(await client(server.url).llen(key)).toBe(50);
  });

  it('pause makes commands time out; resume makes them succeed again', async () => {
    const redis = client(server.url, { commandTimeout: 200 });
    expect(await redis.ping()).toBe('PONG');
    server.pause();
    try {
      await expect(redis.ping()).rejects.toThrow(/timed out/i);
      expect((await pingRedis({ port: server.port, timeoutMs: 200 })).status).toBe('timeout');
    } finally {
      server.resume();
    }
    expect(await redis.ping()).toBe('PONG');
  });
});

describe('startRedis options and lifecycle', () => {
  it('requires the password when one is set; the url carries it (percent-encoded)', async () => {
    const password = 'p@ss:w/rd%';
    const server = await startRedis({ password });
    try {
      expect(server.url).toBe(`redis://:${encodeURIComponent(password)}@127.0.0.1:${server.port}`);
      expect((await pingRedis({ port: server.port })).status).toBe('auth-required');
      expect((await pingRedis({ port: server.port, password: 'wrong' })).status).toBe('auth-failed');
      expect(await client(server.url).ping()).toBe('PONG');
    } finally {
      await server.stop();
    }
  });

  it('without aof, nothing is written to the dir and restart starts empty', async () => {
    const server = await startRedis();
    try {
      const redis = client(server.url);
      expect(await redis.config('GET', 'appendonly')).toEqual(['appendonly', 'no']);
      await redis.set('k', 'v');
      await server.restart();
      expect(await client(server.url).get('k')).toBeNull();
    } finally {
      await server.stop();
    }
  });

  it('stop ends the process, frees the port and removes the dir; a second stop is a no-op', async () => {
    const server = await startRedis({ aof: true });
    const { pid, dir, port } = server;
    await server.stop();
    expect(isRedisServerProcess(pid)).toBe(false);
    expect(existsSync(dir)).toBe(false);
    expect((await pingRedis({ port })).status).toBe('refused');
    await server.stop();
  });

  it('stop works on a paused server', async () => {
    const server = await startRedis();
    server.pause();
    const pid = server.pid;
    await server.stop();
    expect(isRedisServerProcess(pid)).toBe(false);
  });

  it('two servers get different ports and dirs', async () => {
    const [a, b] = await Promise.all([startRedis(), startRedis()]);
    try {
      expect(a.port).not.toBe(b.port);
      expect(a.dir).not.toBe(b.dir);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  });

  it('uniquePrefix is unique and key-safe', () => {
    const a = uniquePrefix('my test: with spaces/and*glob');
    const b = uniquePrefix('my test: with spaces/and*glob');
    expect(a).not.toBe(b);
    expect(a).toMatch(/^t-my-test-with-spaces-and-glob-[0-9a-f]{10}$/);
  });
});

describe('no redis-server outlives its test process', () => {
  const script = (ending: string): string =>
    [
      "import { startRedis } from './test/support/redis.ts';",
      'const server = await startRedis({ aof: true });',
      'console.log(JSON.stringify({ pid: server.pid, dir: server.dir }));',
      ending,
    ].join('\n');

  async function run(ending: string): Promise<{ pid: number; dir: string }> {
    const { stdout } = await execFileAsync(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '-e', script(ending)],
      { cwd: ROOT },
    ).catch((err: { stdout?: string }) => ({
      stdout: err.stdout ?? '',
    }));
    const line = stdout.split('\n').find((l) => l.startsWith('{'));
    if (line === undefined) throw new Error(`no pid printed: ${stdout}`);
    return JSON.parse(line) as { pid: number; dir: string };
  }

  it('process.exit: the exit hook kills it', async () => {
    const { pid, dir } = await run('process.exit(3);');
    expect(await waitUntil(() => !isRedisServerProcess(pid) && !existsSync(dir))).toBe(true);
  });

  it('SIGKILL of the test process: the reaper kills it', async () => {
    const { pid, dir } = await run("setTimeout(() => process.kill(process.pid, 'SIGKILL'), 50);");
    expect(await waitUntil(() => !isRedisServerProcess(pid) && !existsSync(dir))).toBe(true);
  });
});
