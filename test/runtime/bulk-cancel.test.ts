import { describe, expect, it } from 'vitest';
import { InputError } from '../../src/runtime/runtime.ts';
import { runCli } from '../support/cli.ts';
import type { PiEnv } from '../support/pi-env.ts';
import { turnEnded, until, type Harness, useRuntimeSuite, type RuntimeSuite } from '../support/runtime.ts';

/** Bulk cancel by filter: the sessions of a state (from its index set), optionally of one agent; a dry run lists them. */

let env: PiEnv;
let h: Harness;
let cliEnv: RuntimeSuite['cliEnv'];

useRuntimeSuite('bulk-cancel', { scripts: { 'bulk-500': { status: 500 } } }, (s) => {
  ({ env, h, cliEnv } = s);
});

describe('bulk cancel', () => {
  it('queued sessions of one agent: the dry run lists them and changes nothing; then exactly those are cancelled', async () => {
    const pi = await Promise.all(
      [1, 2, 3].map((i) =>
        h.runtime.enqueue({ prompt: `pi ${i}`, options: { provider: 'fake', model: 'text', cwd: env.cwd } }),
      ),
    );
    const other = await h.runtime.enqueue({ prompt: 'codex one', options: { agent: 'codex', cwd: env.cwd } });

    const dry = await runCli(['cancel', '--state', 'queued', '--agent', 'codex', '--dry-run', '--json'], {
      env: cliEnv(),
    });
    expect(dry.exitCode).toBe(0);
    expect(JSON.parse(dry.stdout)).toEqual({
      dryRun: true,
      matched: [{ sessionId: other.sessionId, state: 'queued', agent: 'codex' }],
      cancelled: 0,
    });
    expect((await h.runtime.getSession(other.sessionId))?.cancelRequested).toBe(false);

    const done = await h.runtime.cancelMatching({ state: 'queued', agent: 'pi', reason: 'clearing the queue' });
    expect(done.cancelled).toBe(3);
    expect(done.matched.map((s) => s.sessionId).sort()).toEqual(pi.map((p) => p.sessionId).sort());
    for (const p of pi) expect((await h.runtime.getSession(p.sessionId))?.cancelRequested).toBe(true);
    expect((await h.runtime.getSession(other.sessionId))?.cancelRequested).toBe(false);
  });

  it('sessions backing off are cancelled at once by --state backoff; a bad state is refused naming the field', async () => {
    await h.startWorker();
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'fails',
      options: { provider: 'fake', model: 'bulk-500', cwd: env.cwd },
      retryPolicy: { initialDelayMs: 600_000, maxDelayMs: 600_000 },
    });
    await until(
      async () =>
        (await h.runtime.listSessions({ state: 'backoff' })).some((s) => s.sessionId === sessionId) ? true : null,
      60_000,
      'the backoff',
    );
    const cli = await runCli(['cancel', '--state', 'backoff', '--json'], { env: cliEnv() });
    expect(cli.exitCode).toBe(0);
    expect(JSON.parse(cli.stdout)).toMatchObject({
      dryRun: false,
      cancelled: 1,
      matched: [{ sessionId, state: 'backoff' }],
    });
    expect((await turnEnded(h.runtime, sessionId)).state).toBe('cancelled');

    await expect(h.runtime.cancelMatching({ state: 'completed' })).rejects.toBeInstanceOf(InputError);
    const bad = await runCli(['cancel', '--state', 'done'], { env: cliEnv() });
    expect(bad.exitCode).toBe(2);
    expect(bad.stderr).toContain('state: must be one of queued, running, backoff, parked');
  });
});
