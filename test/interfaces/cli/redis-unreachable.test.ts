import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, startRedis } from '../../support/redis.ts';
import { runCli, sessiond } from '../../support/cli.ts';

/**
 * Redis that does not answer: a command gives up with the URL (password masked) and what to do,
 * instead of hanging; a worker says so once and starts when Redis comes up. Real processes, a real
 * redis-server brought up late on the port the worker was given.
 */

const stateDir = mkdtempSync(join(tmpdir(), 'sessiond-unreachable-'));
afterAll(() => rmSync(stateDir, { recursive: true, force: true }));

async function until(check: () => boolean, what: string, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('Redis that does not answer', () => {
  it.each([['list'], ['inspect', 'some-session'], ['enqueue', '--agent', 'pi', 'hello']])(
    '`sessiond %s` exits 2 naming the URL without its password, and how to fix it',
    async (...args: string[]) => {
      // Nothing listens on this port.
      const url = `redis://:hunter2@127.0.0.1:${await freePort()}`;
      const result = await runCli(args, { env: { REDIS_URL: url, SESSIOND_STATE_DIR: stateDir } });
      expect(result.exitCode).toBe(2);
      expect(result.stderr).toMatch(
        /cannot reach Redis at redis:\/\/:\*\*\*@127\.0\.0\.1:\d+\/0: no answer within 5 s/,
      );
      expect(result.stderr).toContain('ECONNREFUSED');
      expect(result.stderr).toContain('REDIS_URL=redis://HOST:PORT');
      expect(result.stderr).not.toContain('hunter2');
    },
  );

  it('a worker says once that Redis does not answer, keeps trying, and starts when it does', async () => {
    const server = await startRedis();
    await server.kill();
    const worker = sessiond(['worker'], { env: { REDIS_URL: server.url, SESSIOND_STATE_DIR: stateDir } });
    let stderr = '';
    worker.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    try {
      await until(() => stderr.includes('Still trying'), 'the worker to say it is still trying');
      expect(stderr).toContain(`cannot reach Redis at ${server.url}/0`);
      await server.restart();
      await until(() => /sessiond worker \S+ started/.test(stderr), 'the worker to start');
      expect(stderr.split('Still trying')).toHaveLength(2);
    } finally {
      worker.kill('SIGTERM');
      await worker;
      await server.stop();
    }
  });
});
