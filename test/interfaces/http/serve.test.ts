import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, sessiond } from '../../support/cli.ts';
import { startRedis, uniquePrefix, type RedisServer } from '../../support/redis.ts';

/** `sessiond serve` as a user runs it: a separate process through the package's bin. */

let redis: RedisServer;

beforeAll(async () => {
  redis = await startRedis();
});

afterAll(async () => {
  await redis?.stop();
});

const baseEnv = () => ({
  PATH: process.env.PATH ?? '/usr/bin:/bin',
  HOME: process.env.HOME ?? '/tmp',
  REDIS_URL: redis.url,
  SESSIOND_PREFIX: uniquePrefix('serve'),
  SESSIOND_LOG_LEVEL: 'warn',
});

describe('sessiond serve', () => {
  it('serves on 127.0.0.1, answers, and exits 0 on SIGTERM', async () => {
    const child = sessiond(['serve', '--port', '0'], { env: baseEnv() });
    const url = await new Promise<string>((resolve, reject) => {
      let seen = '';
      child.stderr?.on('data', (chunk: Buffer) => {
        seen += chunk.toString('utf8');
        const match = /serving (http:\/\/127\.0\.0\.1:\d+)/.exec(seen);
        if (match?.[1] !== undefined) resolve(match[1]);
      });
      void child.then(() => reject(new Error(`serve exited early:\n${seen}`)));
    });
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    const ready = await fetch(`${url}/readyz`);
    expect(ready.status).toBe(503);
    expect(await ready.json()).toMatchObject({ reason: 'no worker has ever sent a heartbeat' });
    expect((await fetch(`${url}/`)).headers.get('content-type')).toMatch(/text\/html/);
    child.kill('SIGTERM');
    const result = await child;
    expect(result.exitCode).toBe(0);
  });

  it('refuses to bind anywhere but loopback without a token (exit 2), and never prints the token', async () => {
    const refused = await runCli(['serve', '--host', '0.0.0.0', '--port', '0'], { env: baseEnv() });
    expect(refused.exitCode).toBe(2);
    expect(refused.stderr).toMatch(/without an API token.*SESSIOND_API_TOKEN/);

    const badPort = await runCli(['serve', '--port', '70000'], { env: baseEnv() });
    expect(badPort.exitCode).toBe(2);
    expect(badPort.stderr).toMatch(/--port must be an integer from 0 to 65535/);

    const shortToken = await runCli(['serve', '--host', '0.0.0.0', '--port', '0'], {
      env: { ...baseEnv(), SESSIOND_API_TOKEN: 'tiny-secret' },
    });
    expect(shortToken.exitCode).toBe(2);
    expect(shortToken.stderr).toMatch(/http\.token: must be at least 16 characters/);
    expect(shortToken.stderr).not.toContain('tiny-secret');
  });

  it('serve --tls-cert/--tls-key speaks HTTPS (the login cookie is Secure); plain HTTP gets no answer; one without the other is a usage error', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sessiond-tls-'));
    try {
      const cert = join(dir, 'cert.pem');
      const key = join(dir, 'key.pem');
      execFileSync(
        'openssl',
        [
          'req',
          '-x509',
          '-newkey',
          'rsa:2048',
          '-nodes',
          '-keyout',
          key,
          '-out',
          cert,
          '-days',
          '1',
          '-subj',
          '/CN=localhost',
          '-addext',
          'subjectAltName=IP:127.0.0.1,DNS:localhost',
        ],
        { stdio: 'ignore' },
      );
      const token = 'tls-admin-token-0123456789';
      const child = sessiond(['serve', '--port', '0', '--tls-cert', cert, '--tls-key', key], {
        env: { ...baseEnv(), SESSIOND_API_TOKEN: token },
      });
      const url = await new Promise<string>((resolve, reject) => {
        let seen = '';
        child.stderr?.on('data', (chunk: Buffer) => {
          seen += chunk.toString('utf8');
          const match = /serving (https:\/\/127\.0\.0\.1:\d+)/.exec(seen);
          if (match?.[1] !== undefined) resolve(match[1]);
        });
        void child.then(() => reject(new Error(`serve exited early:\n${seen}`)));
      });
      const port = Number(new URL(url).port);
      const ca = readFileSync(cert);
      const tls = (method: string, path: string, body?: string) =>
        new Promise<{ status: number; cookie: string; text: string }>((resolve, reject) => {
          const req = httpsRequest(
            {
              host: '127.0.0.1',
              port,
              method,
              path,
              ca,
              headers:
                body === undefined ? {} : { 'content-type': 'application/json', 'content-length': String(body.length) },
            },
            (res) => {
              let text = '';
              res.on('data', (c: Buffer) => (text += c.toString('utf8')));
              res.on('end', () =>
                resolve({ status: res.statusCode ?? 0, cookie: String(res.headers['set-cookie'] ?? ''), text }),
              );
            },
          );
          req.on('error', reject);
          req.end(body);
        });
      expect((await tls('GET', '/healthz')).status).toBe(200);
      expect((await tls('GET', '/api/sessions')).status).toBe(401);
      const login = await tls('POST', '/api/login', JSON.stringify({ token }));
      expect(login.status).toBe(200);
      expect(login.cookie).toMatch(/HttpOnly/);
      expect(login.cookie).toMatch(/Secure/);
      const plain = await new Promise<number | string>((resolve) => {
        const req = httpRequest({ host: '127.0.0.1', port, path: '/healthz', timeout: 5000 }, (res) =>
          resolve(res.statusCode ?? 0),
        );
        req.on('error', (error) => resolve(error.message));
        req.on('timeout', () => req.destroy(new Error('timeout')));
        req.end();
      });
      expect(plain).not.toBe(200);
      child.kill('SIGTERM');
      expect((await child).exitCode).toBe(0);

      const half = await runCli(['serve', '--port', '0', '--tls-cert', cert], { env: baseEnv() });
      expect(half.exitCode).toBe(2);
      expect(half.stderr).toMatch(/--tls-cert and --tls-key go together/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
