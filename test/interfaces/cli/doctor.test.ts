import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DoctorReport } from '../../../src/interfaces/cli/commands/doctor-action.ts';
import { runCli } from '../../support/cli.ts';
import { startCliDeployment, type CliDeployment } from '../../support/cli-deployment.ts';
import { freePort } from '../../support/redis.ts';

/** `sessiond doctor` against a real redis-server and a real `sessiond worker` process. */

let deployment: CliDeployment;
// A PATH with no git on it (an empty directory): node is run by its path, so nothing else is missing.
let noGitPath: string;
beforeAll(async () => {
  deployment = await startCliDeployment('doctor');
  noGitPath = mkdtempSync(join(tmpdir(), 'sessiond-no-git-'));
});
afterAll(async () => {
  await deployment?.stop();
  if (noGitPath !== undefined) rmSync(noGitPath, { recursive: true, force: true });
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
    // Workspaces are on by default: where they live, and this host's git.
    expect(report?.workspaces).toEqual({
      enabled: true,
      root: join(deployment.stateDir, 'workspaces'),
      store: join(deployment.stateDir, 'workspace-store.git'),
      git: { ok: true, version: expect.stringMatching(/^git version \d+\.\d+/) as unknown },
    });
    expect(report?.problems.map((p) => p.what).join('\n')).not.toMatch(/no live worker|no worker has ever|git/);
  });

  it('with workspaces on and no git on PATH: exit 1, says a worker would not start, and both fixes', async () => {
    const { exitCode, report } = await doctor({ ...deployment.cliEnv, PATH: noGitPath });
    expect(exitCode).toBe(1);
    expect(report.workspaces).toMatchObject({
      enabled: true,
      git: { ok: false, reason: `git was not found on PATH (${noGitPath})` },
    });
    expect(report.problems).toContainEqual({
      what: expect.stringMatching(
        /^workspaces are on and git cannot run on this host .*a worker here refuses to start$/,
      ) as unknown,
      fix: expect.stringMatching(/install git .*SESSIOND_WORKSPACES_ENABLED=false/) as unknown,
    });
    // Off, git is not needed: reported, not a problem.
    const off = await doctor({ ...deployment.cliEnv, PATH: noGitPath, SESSIOND_WORKSPACES_ENABLED: 'false' });
    expect(off.report.workspaces).toMatchObject({ enabled: false, git: { ok: false } });
    expect(off.report.problems.map((p) => p.what).join('\n')).not.toMatch(/git/);
  });

  it('a worker with workspaces on (the default) and no git on PATH refuses to start, naming both fixes', async () => {
    const result = await runCli(['worker'], { env: { ...deployment.cliEnv, PATH: noGitPath } });
    expect(result.exitCode).toBe(1);
    expect(result.stderr).toContain(
      `sessiond: workspaces.enabled: per-session workspaces are on (the default) and need git on this host, which cannot run: git was not found on PATH (${noGitPath}). Install git, or turn workspaces off: SESSIOND_WORKSPACES_ENABLED=false`,
    );
    expect(result.stderr).not.toContain('worker started');
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
    // The workspaces and this host's git, in the text too.
    expect(text.stdout).toMatch(/^workspaces: on, root .+; git version \d/m);
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
