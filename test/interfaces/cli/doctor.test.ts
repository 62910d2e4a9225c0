import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DoctorReport } from '../../../src/interfaces/cli/commands/doctor-action.ts';
import { runCli } from '../../support/cli.ts';
import { startCliDeployment, type CliDeployment } from '../../support/cli-deployment.ts';
import { freePort } from '../../support/redis.ts';

/** `sessiond doctor` against a real redis-server and a real `sessiond worker` process. */

let deployment: CliDeployment;
beforeAll(async () => {
  deployment = await startCliDeployment('doctor');
});
afterAll(async () => {
  await deployment?.stop();
});

async function doctor(env: Record<string, string>): Promise<{ exitCode: number; report: DoctorReport }> {
  const result = await runCli(['doctor', '--json'], { env });
  return { exitCode: result.exitCode, report: JSON.parse(result.stdout) as DoctorReport };
}

describe('sessiond doctor', () => {
  it('reports Redis, the live worker with what it offers, and this host’s agents', async () => {
    let report: DoctorReport | undefined;
    // The worker's first heartbeat may not be written yet.
    for (const deadline = Date.now() + 60_000; Date.now() < deadline;) {
      report = (await doctor(deployment.cliEnv)).report;
      if (report.workers.some((w) => w.live)) break;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    expect(report?.configuration).toEqual({ ok: true });
    expect(report?.redis).toMatchObject({
      reachable: true,
      mode: 'standalone',
      version: expect.stringMatching(/^\d+\.\d+/),
    });
    const [worker] = report?.workers ?? [];
    expect(worker).toMatchObject({
      live: true,
      concurrency: 2,
      partitions: [0],
      agents: ['claude-code', 'gemini', 'codex', 'pi'],
    });
    expect(report?.agents.find((a) => a.name === 'pi')).toMatchObject({ installed: true, version: '0.73.1' });
    expect(report?.problems.map((p) => p.what).join('\n')).not.toMatch(/no live worker|no worker has ever/);
  });

  it('with no worker on its prefix: exit 1, and says to start one', async () => {
    const env = { ...deployment.cliEnv, SESSIOND_PREFIX: `${deployment.cliEnv.SESSIOND_PREFIX}-none` };
    const { exitCode, report } = await doctor(env);
    expect(exitCode).toBe(1);
    expect(report.workers).toEqual([]);
    expect(report.problems).toContainEqual({
      what: expect.stringContaining('no worker has ever sent a heartbeat') as unknown,
      fix: expect.stringContaining('sessiond worker') as unknown,
    });
    const text = await runCli(['doctor'], { env });
    expect(text.stdout).toContain('✗ no worker has ever sent a heartbeat');
  });

  it('with Redis not answering: exit 1, the URL without its password, the connection error and the fixes', async () => {
    const env = { ...deployment.cliEnv, REDIS_URL: `redis://:hunter2@127.0.0.1:${await freePort()}` };
    const result = await runCli(['doctor', '--json'], { env });
    expect(result.exitCode).toBe(1);
    const report = JSON.parse(result.stdout) as DoctorReport;
    expect(report.redis).toMatchObject({ reachable: false, url: expect.stringContaining('***') });
    expect(report.problems[0]?.what).toMatch(
      /^cannot reach Redis at redis:\/\/:\*\*\*@127\.0\.0\.1:\d+\/0: ECONNREFUSED/,
    );
    expect(report.problems[0]?.fix).toContain('REDIS_URL=redis://HOST:PORT');
    expect(result.stdout + result.stderr).not.toContain('hunter2');
  });
});
