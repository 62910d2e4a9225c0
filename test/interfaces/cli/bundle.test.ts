import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleCli } from '../../../scripts/bundle-cli.mjs';
import { FAST_COMMANDS } from '../../../src/interfaces/cli/fast.ts';
import { buildProgram } from '../../../src/interfaces/cli/main.ts';
import { jsonLines, runCli } from '../../support/cli.ts';
import { startCliDeployment, type CliDeployment } from '../../support/cli-deployment.ts';
import { REPO_ROOT } from '../../support/pi-env.ts';

// The package's executable runs its fast commands from one bundle (scripts/bundle-cli.mjs, in
// dist/cli/). This builds that bundle from the sources as they are now, into a directory inside the
// checkout's node_modules (so that what the bundle resolves from its own place, BullMQ and the package
// root, resolves as from dist/cli/), and drives every fast command through it as an operator would,
// against a real redis-server and a worker running real pi turns.
let outdir: string;
let runner: string;
let deployment: CliDeployment;

beforeAll(async () => {
  const cache = join(REPO_ROOT, 'node_modules', '.cache');
  mkdirSync(cache, { recursive: true });
  outdir = mkdtempSync(join(cache, 'sessiond-cli-bundle-'));
  // What bin/sessiond.mjs does with dist/cli/fast.js; a command line it does not list exits 99 here.
  runner = join(outdir, 'run.mjs');
  writeFileSync(
    runner,
    "const { runFast } = await import('./fast.js');\nprocess.exit((await runFast(process.argv)) ?? 99);\n",
  );
  [deployment] = await Promise.all([startCliDeployment('bundle'), bundleCli({ root: REPO_ROOT, outdir })]);
}, 120_000);

afterAll(async () => {
  await deployment?.stop();
  if (outdir !== undefined) rmSync(outdir, { recursive: true, force: true });
});

const bundled = (args: readonly string[]) => runCli(args, { env: deployment.cliEnv, bin: runner });

const model = (m: string) => deployment.model(m);

describe("the package's CLI bundle", () => {
  it('gives every fast command the help the whole program gives it', async () => {
    const whole = buildProgram();
    for (const name of Object.keys(FAST_COMMANDS)) {
      const result = await bundled([name, '--help']);
      expect(result.exitCode, `${name} --help: ${result.stderr}`).toBe(0);
      expect(result.stdout.trimEnd()).toBe(
        whole.commands
          .find((c) => c.name() === name)!
          .helpInformation()
          .trimEnd(),
      );
    }
    // `--help` and other commands are not the bundle's: bin/sessiond.mjs hands them to dist/src.
    expect((await bundled(['--help'])).exitCode).toBe(99);
    expect((await bundled(['worker'])).exitCode).toBe(99);
  });

  it('enqueue --follow streams a real pi turn to its end; inspect, list, watch and prompts show it', async () => {
    const follow = await bundled(['enqueue', ...model('text'), '--follow', 'Say hello']);
    expect(follow.exitCode, follow.stderr).toBe(0);
    expect(follow.stdout).toContain('Hello from the fake LLM.');
    const sessionId = /session (\S+), turn 1/.exec(follow.stderr)?.[1];
    expect(sessionId).toBeTruthy();

    const inspect = await bundled(['inspect', sessionId!, '--json']);
    expect(inspect.exitCode).toBe(0);
    expect(JSON.parse(inspect.stdout)).toMatchObject({
      sessionId,
      state: 'completed',
      turn: { index: 1, status: 'completed' },
    });
    const list = await bundled(['list', '--state', 'completed', '--json']);
    expect(JSON.parse(list.stdout)).toContainEqual({ sessionId, state: 'completed' });
    const watch = await bundled(['watch', sessionId!, '--json']);
    expect(watch.exitCode).toBe(0);
    expect(jsonLines(watch.stdout).at(-1)?.type).toBe('terminal.completed');
    const prompts = await bundled(['prompts', sessionId!, '--json']);
    expect(prompts.exitCode, prompts.stderr).toBe(0);
    expect(JSON.parse(prompts.stdout)).toEqual({ sessionId, prompts: [] });
    const policy = await bundled(['retry-policy', 'get', '--json']);
    expect(policy.exitCode, policy.stderr).toBe(0);
    expect(JSON.parse(policy.stdout)).toHaveProperty('maxAttempts');
  });

  it('exports, imports under a new id, cancels, deletes and lists the deletions', async () => {
    const queued = await bundled(['enqueue', ...model('long-tool'), '--json', 'Run a long command']);
    expect(queued.exitCode, queued.stderr).toBe(0);
    const { sessionId } = JSON.parse(queued.stdout) as { sessionId: string };
    const cancel = await bundled(['cancel', sessionId]);
    expect(cancel.exitCode, cancel.stderr).toBe(0);
    const cancelled = await bundled(['inspect', sessionId, '--json']);
    expect(JSON.parse(cancelled.stdout)).toMatchObject({ sessionId, turn: { status: 'cancelled' } });

    const archive = join(deployment.stateDir, 'archive.jsonl');
    const exported = await bundled(['export', sessionId, '--out', archive]);
    expect(exported.exitCode, exported.stderr).toBe(0);
    expect(readFileSync(archive, 'utf8').split('\n')[0]).toContain('"sessiond.archive"');
    const copy = `${sessionId}-copy`;
    const imported = await bundled(['import', archive, '--as', copy, '--json']);
    expect(imported.exitCode, imported.stderr).toBe(0);
    expect(JSON.parse(imported.stdout)).toMatchObject({ sessionId: copy });

    for (const id of [sessionId, copy]) {
      const deleted = await bundled(['delete', id, '--json']);
      expect(deleted.exitCode, deleted.stderr).toBe(0);
      expect(JSON.parse(deleted.stdout)).toMatchObject({ sessionId: id, deleted: true });
      expect((await bundled(['inspect', id])).exitCode).toBe(3);
    }
    const deletions = await bundled(['deletions', '--json']);
    expect((JSON.parse(deletions.stdout) as Array<{ sessionId: string }>).map((d) => d.sessionId)).toEqual(
      expect.arrayContaining([sessionId, copy]),
    );
  });

  it('refuses clearly: an unknown id exits 3, a retry of a completed turn exits 1 with the reason', async () => {
    for (const command of ['inspect', 'watch', 'cancel', 'retry', 'export']) {
      const result = await bundled([command, 'no-such-session']);
      expect(result.exitCode, `${command}: ${result.stderr}`).toBe(3);
      expect(result.stderr).toContain('unknown session "no-such-session"');
    }
    const done = await bundled(['enqueue', ...model('text'), '--follow', '--json', 'hi']);
    const sessionId = /session (\S+), turn 1/.exec(done.stderr)?.[1];
    const retry = await bundled(['retry', sessionId!]);
    expect(retry.exitCode).toBe(1);
    expect(retry.stderr).toMatch(/^sessiond: .+/);
    expect(retry.stderr).not.toContain('    at ');
  });

  it('ends as on Ctrl+C, with no stack trace, when the reader of its output goes away', async () => {
    await bundled(['enqueue', '--session', 'bundle-epipe', ...model('text'), 'hi']);
    const child = spawn(process.execPath, [runner, 'list'], {
      env: deployment.cliEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.destroy(); // the reader is gone before the first line is written
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) =>
      child.once('close', (c, signal) => resolve(c ?? (signal === 'SIGINT' ? 130 : null))),
    );
    expect(code).toBe(130);
    expect(stderr).toBe('');
  });
});
