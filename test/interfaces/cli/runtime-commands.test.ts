import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsonLines, runCli, sessiond } from '../../support/cli.ts';
import { startCliDeployment, type CliDeployment } from '../../support/cli-deployment.ts';

let deployment: CliDeployment;

beforeAll(async () => {
  deployment = await startCliDeployment('cli');
});

afterAll(async () => {
  await deployment?.stop();
});

const cli = (args: string[]) => runCli(args, { env: deployment.cliEnv });
const model = (m: string) => deployment.model(m);

describe('sessiond CLI against a real Redis and a worker process', () => {
  it('enqueue --follow streams the turn and exits 0 when it completes; inspect, watch and list show it', async () => {
    const follow = await cli(['enqueue', ...model('text'), '--follow', 'Say hello']);
    expect(follow.exitCode).toBe(0);
    expect(follow.stdout).toContain('Hello from the fake LLM.');
    expect(follow.stdout).toContain('turn 1: completed');
    const sessionId = /session (\S+), turn 1/.exec(follow.stderr)?.[1];
    expect(sessionId).toBeTruthy();

    const inspect = await cli(['inspect', sessionId!, '--json']);
    expect(inspect.exitCode).toBe(0);
    const summary = JSON.parse(inspect.stdout) as Record<string, unknown>;
    expect(summary).toMatchObject({
      sessionId,
      state: 'completed',
      turn: { index: 1, status: 'completed', attempts: [{ attempt: 1, outcome: 'completed' }] },
    });
    const history = summary.history as Array<{ to: string; event: string; label: string; prompt?: { text: string } }>;
    expect(history.map((t) => t.to)).toContain('running');
    // Each transition in words besides the machine's own name; the turn's prompt with the one that started it.
    expect(history.find((t) => t.event === 'attempt.ended')?.label).toBe('the attempt ended');
    expect(history.find((t) => t.prompt !== undefined)?.prompt?.text).toBe('Say hello');
    const text = await cli(['inspect', sessionId!]);
    expect(text.stdout).toMatch(/running → completed {2}the attempt ended {2}attempt\.ended/);
    expect(text.stdout).toContain('prompt of turn 1: Say hello');

    const watch = await cli(['watch', sessionId!, '--json']);
    expect(watch.exitCode).toBe(0);
    const lines = jsonLines(watch.stdout) as unknown as Array<{
      seq: number;
      turn: number;
      attempt: number;
      type: string;
    }>;
    expect(lines.map((l) => l.seq)).toEqual(lines.map((_, i) => i + 1));
    expect(lines[0]).toMatchObject({ seq: 1, turn: 1, attempt: 1, type: 'session.started' });
    expect(lines.at(-1)?.type).toBe('terminal.completed');

    const fromThree = await cli(['watch', sessionId!, '--json', '--from', '3']);
    expect(jsonLines(fromThree.stdout)[0]).toMatchObject({ seq: 3 });

    const list = await cli(['list', '--state', 'completed', '--json']);
    expect(JSON.parse(list.stdout)).toContainEqual({ sessionId, state: 'completed' });
  });

  it('enqueue --follow with no live worker says so once on stderr and waits; the turn completes once one starts', async () => {
    // A prefix no worker serves yet.
    const env = { ...deployment.cliEnv, SESSIOND_PREFIX: `${deployment.cliEnv.SESSIOND_PREFIX}-late` };
    const follow = sessiond(['enqueue', ...model('text'), '--follow', 'Say hello'], { env });
    let stderr = '';
    follow.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    for (const deadline = Date.now() + 60_000; !stderr.includes('no live worker');) {
      if (Date.now() > deadline) throw new Error(`no notice of a missing worker; stderr: ${stderr}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(stderr).toContain('no live worker can take turn 1: no worker has ever sent a heartbeat');
    const worker = sessiond(['worker'], { env });
    try {
      const result = await follow;
      expect(result.exitCode).toBe(0);
      expect(String(result.stdout)).toContain('Hello from the fake LLM.');
      expect(stderr.split('no live worker')).toHaveLength(2);
    } finally {
      worker.kill('SIGTERM');
      await worker.catch(() => undefined);
    }
  });

  it('enqueue --json prints {sessionId, turn}; a retried failure shows its attempts; --follow exits 1 when the turn fails', async () => {
    deployment.server.setScript('cli-flaky', [{ status: 500 }, { text: 'second time lucky' }]);
    const queued = await cli([
      'enqueue',
      ...model('cli-flaky'),
      '--retry-initial-delay',
      '200ms',
      '--retry-jitter',
      'none',
      '--json',
      'try',
    ]);
    expect(queued.exitCode).toBe(0);
    const { sessionId, turn } = JSON.parse(queued.stdout) as { sessionId: string; turn: number };
    expect(turn).toBe(1);
    const watch = await cli(['watch', sessionId]);
    expect(watch.stdout).toContain('attempt 1 failed (server_error)');
    expect(watch.stdout).toContain('retrying in 200ms');
    expect(watch.stdout).toContain('second time lucky');
    const failed = await cli(['enqueue', ...model('http401'), '--follow', 'denied']);
    expect(failed.exitCode).toBe(1);
    expect(failed.stderr).toContain('not_retryable');
  });

  it('cancel from another command ends a followed turn: enqueue --follow exits 130', async () => {
    const follow = sessiond(['enqueue', ...model('long-tool'), '--follow', '--json', 'Run a long command'], {
      env: deployment.cliEnv,
    });
    let out = '';
    let err = '';
    follow.stderr?.on('data', (d: Buffer) => (err += d.toString()));
    await new Promise<void>((resolve, reject) => {
      follow.stdout?.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('"tool.call"')) resolve();
      });
      follow.on('exit', () => reject(new Error(`exited early: ${out} ${err}`)));
    });
    const id = /session (\S+), turn/.exec(err)?.[1];
    expect(id).toBeTruthy();
    const cancel = await cli(['cancel', id!]);
    expect(cancel.exitCode).toBe(0);
    const result = await follow;
    expect(result.exitCode).toBe(130);
    const inspect = JSON.parse((await cli(['inspect', id!, '--json'])).stdout) as { turn: { status: string } };
    expect(inspect.turn.status).toBe('cancelled');
    // The log ends the attempt once (issue 28): the running bash call closed, then the cancel; `watch` says so.
    const watched = await cli(['watch', id!, '--json']);
    const types = watched.stdout
      .trim()
      .split('\n')
      .map((line) => (JSON.parse(line) as { type: string }).type);
    expect(types.slice(-2)).toEqual(['tool.failed', 'terminal.cancelled']);
    expect((await cli(['watch', id!])).stdout).toMatch(/✗ bash .*\n.*── attempt 1 cancelled: /);
  });

  it('unknown session ids exit 3 with a clear message', async () => {
    for (const args of [
      ['inspect', 'no-such-session'],
      ['watch', 'no-such-session'],
      ['cancel', 'no-such-session'],
    ]) {
      const result = await cli(args);
      expect(result.exitCode).toBe(3);
      expect(result.stderr).toContain('unknown session "no-such-session"');
    }
  });

  it('retry-policy get/set/reset; a bad value is refused naming the field and the range, and nothing changes', async () => {
    const set = await cli([
      'retry-policy',
      'set',
      '--retry-max-attempts',
      '7',
      '--retry-initial-delay',
      '2s',
      '--json',
    ]);
    expect(set.exitCode).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({ maxAttempts: 7, initialDelayMs: 2000 });
    const bad = await cli(['retry-policy', 'set', '--retry-max-delay', '500ms']);
    expect(bad.exitCode).toBe(2);
    expect(bad.stderr).toContain('maxDelayMs');
    const badDuration = await cli(['retry-policy', 'set', '--retry-initial-delay', 'soon']);
    expect(badDuration.exitCode).toBe(2);
    expect(badDuration.stderr).toContain('--retry-initial-delay');
    const get = JSON.parse((await cli(['retry-policy', 'get', '--json'])).stdout) as Record<string, unknown>;
    expect(get).toMatchObject({ maxAttempts: 7, initialDelayMs: 2000, source: 'global' });
    await cli(['retry-policy', 'reset']);
    expect(JSON.parse((await cli(['retry-policy', 'get', '--json'])).stdout)).toMatchObject({
      maxAttempts: 4,
      source: 'default',
    });
  });

  it('list pages through every session with --cursor: no session twice, none left out, and a bad cursor is exit 2', async () => {
    const all = (JSON.parse((await cli(['list', '--json'])).stdout) as Array<{ sessionId: string }>).map(
      (s) => s.sessionId,
    );
    expect(all.length).toBeGreaterThanOrEqual(2);
    const seen: string[] = [];
    let cursor: string | null = null;
    for (let page = 0; page <= all.length; page += 1) {
      const result = await cli([
        'list',
        '--limit',
        '1',
        '--json',
        '--paged',
        ...(cursor === null ? [] : ['--cursor', cursor]),
      ]);
      expect(result.exitCode).toBe(0);
      const parsed = JSON.parse(result.stdout) as { sessions: Array<{ sessionId: string }>; next: string | null };
      seen.push(...parsed.sessions.map((s) => s.sessionId));
      cursor = parsed.next;
      if (cursor === null) break;
    }
    expect(seen).toEqual(all);
    // Text mode: the ids on stdout, the way to the next page on stderr.
    const text = await cli(['list', '--limit', '1']);
    expect(text.stdout.trim().split('\n')).toHaveLength(1);
    expect(text.stderr).toMatch(/more: sessiond list --limit 1 --cursor \S+/);
    const bad = await cli(['list', '--cursor', 'not-a-cursor']);
    expect(bad.exitCode).toBe(2);
    expect(bad.stderr).toContain('--cursor: must be the `next` of an earlier page');
  });

  it('bad arguments and bad options are refused with exit 2, naming them, and nothing is enqueued', async () => {
    const before = JSON.parse((await cli(['list', '--json'])).stdout) as unknown[];
    const thinking = await cli(['enqueue', '--thinking', 'extreme', 'x']);
    expect(thinking.exitCode).toBe(2);
    expect(thinking.stderr).toContain('--thinking');
    const empty = await cli(['enqueue', '   ']);
    expect(empty.exitCode).toBe(2);
    expect(empty.stderr).toContain('prompt');
    const badSession = await cli(['enqueue', '--session', 'has spaces', 'x']);
    expect(badSession.exitCode).toBe(2);
    expect(badSession.stderr).toContain('sessionId');
    const badState = await cli(['list', '--state', 'sleeping']);
    expect(badState.exitCode).toBe(2);
    expect(JSON.parse((await cli(['list', '--json'])).stdout)).toHaveLength(before.length);
  });
});
