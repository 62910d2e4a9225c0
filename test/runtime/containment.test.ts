import { describe, expect, it } from 'vitest';
import type { SandboxMode } from '../../src/process/index.ts';
import { markerScope, reapOrphans } from '../../src/runtime/orphans.ts';
import { hasToolResult, type FakeModelServer, type Script, type ScriptStep } from '../support/fake-model-server.ts';
import type { PiEnv } from '../support/pi-env.ts';
import { SANDBOX_MODES, useWorkerSandbox } from '../support/processes.ts';
import { liveSleeps } from '../support/ps.ts';
import type { SessionWorker } from '../../src/runtime/worker.ts';
import { turnEnded, until, type Harness, useRuntimeSuite } from '../support/runtime.ts';
import { killAllWorkerProcesses, startWorkerProcess } from '../support/worker-process.ts';
import { internals } from '../../src/runtime/internals.ts';

/**
 * No process of an attempt outlives it, however the attempt ends: a tool's `sleep &`, a `setsid`
 * child and an `env -i setsid` child (no marker, its own session and group, reparented to init)
 * are all gone once the turn is recorded as ended — completed, cancelled, timed out — and after a
 * kill -9 of the worker, once the next worker has started. Each case runs once per sandbox mode of
 * SANDBOX_MODES (unsandboxed and bubblewrap; bwrap is required on the host): the workers read
 * SESSIOND_SANDBOX once per process, set for each block, and every attempt's record says its mode.
 */

/** A tool that leaves three escapes running (unique durations to find them), then `then`. */
const escapes = (n: number, then: string) =>
  `sleep ${n} & setsid sleep ${n + 1} & env -i /usr/bin/setsid /bin/sleep ${n + 2} & ${then}`;
const sleeps = (n: number) => [n, n + 1, n + 2];
const toolThen =
  (command: string, after: ScriptStep): Script =>
  ({ body }) =>
    hasToolResult(body) ? after : { toolCalls: [{ name: 'bash', arguments: { command } }] };

/** The sleeps' durations differ per mode: what one block left is never taken for another's. */
const offset = (mode: SandboxMode) => ({ none: 0, bwrap: 500, landlock: 700 })[mode];

const SCRIPTS: Record<string, Script> = Object.fromEntries(
  SANDBOX_MODES.flatMap((mode) => {
    const n = (base: number) => base + offset(mode);
    return [
      [`escape-complete-${mode}`, toolThen(escapes(n(4101), 'echo started'), { text: 'Started them.' })],
      [`escape-cancel-${mode}`, toolThen(escapes(n(4111), `sleep ${n(4119)}`), { text: 'never' })],
      [`escape-idle-${mode}`, toolThen(escapes(n(4121), 'echo started'), { hang: true })],
      [`escape-crash-${mode}`, toolThen(escapes(n(4131), `sleep ${n(4139)}`), { text: 'never' })],
    ];
  }),
);

let server: FakeModelServer;
let env: PiEnv;
let h: Harness;
let redisUrl = '';
let inProcess: SessionWorker | null = null;

useRuntimeSuite(
  'containment',
  {
    scripts: SCRIPTS,
    cleanup: async () => {
      await killAllWorkerProcesses();
      if (h !== undefined) await reapOrphans(markerScope(internals(h.runtime).keys.prefix));
    },
  },
  (s) => {
    ({ server, env, h } = s);
    redisUrl = s.redis.url;
  },
);

const options = (model: string, extra: Record<string, unknown> = {}) => ({
  provider: 'fake',
  model,
  cwd: env.cwd,
  ...extra,
});

describe.each(SANDBOX_MODES)('containment: no process of an attempt outlives it [sandbox %s]', (mode) => {
  const n = (base: number) => base + offset(mode);
  // Read once per process by the workers (in-process and started from here on).
  useWorkerSandbox(mode);
  /** Every attempt of the session's turn ran in this block's mode. */
  const sandboxes = (view: Awaited<ReturnType<typeof turnEnded>>) => view.context?.turn?.attempts.map((a) => a.sandbox);

  it('a turn that completes normally leaves none of the tool’s background, setsid and env -i setsid processes', async () => {
    inProcess = await h.startWorker();
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Start some sleeps',
      options: options(`escape-complete-${mode}`),
    });
    const view = await turnEnded(h.runtime, sessionId);
    expect(view.state).toBe('completed');
    expect(server.requestsFor(`escape-complete-${mode}`)).toHaveLength(2);
    expect(sandboxes(view)).toEqual([mode]);
    expect(liveSleeps(sleeps(n(4101)))).toEqual([]);
  });

  it('a cancel during the tool leaves none of them', async () => {
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Start and wait',
      options: options(`escape-cancel-${mode}`),
    });
    await until(
      async () => liveSleeps([...sleeps(n(4111)), n(4119)]).length === 4 || null,
      60_000,
      'the tool’s processes',
    );
    await h.runtime.cancel(sessionId, 'test');
    const view = await turnEnded(h.runtime, sessionId);
    expect(view.state).toBe('cancelled');
    expect(sandboxes(view)).toEqual([mode]);
    expect(liveSleeps([...sleeps(n(4111)), n(4119)])).toEqual([]);
  });

  it('an idle timeout leaves none of them', async () => {
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Start then go quiet',
      options: options(`escape-idle-${mode}`, { idleTimeoutMs: 2000 }),
      retryPolicy: { enabled: false },
    });
    const view = await turnEnded(h.runtime, sessionId);
    expect(view.state).toBe('failed');
    expect(view.context?.lastFailure?.category).toBe('timeout');
    expect(sandboxes(view)).toEqual([mode]);
    expect(liveSleeps(sleeps(n(4121)))).toEqual([]);
  });

  it('after kill -9 of the worker, the next worker to start on the host kills them', async () => {
    // Only worker processes from here on: the one to kill must be the one that drives the session.
    await inProcess?.close(2000);
    const first = await startWorkerProcess({
      redisUrl,
      prefix: h.prefix,
      env,
      stateDir: h.stateDir,
      leaseTtl: '2s',
      stalledInterval: '1s',
    });
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Start and wait',
      options: options(`escape-crash-${mode}`),
      retryPolicy: { enabled: false },
    });
    await until(
      async () => liveSleeps([...sleeps(n(4131)), n(4139)]).length === 4 || null,
      60_000,
      'the tool’s processes',
    );
    first.kill('SIGKILL');
    await first.exited;
    if (mode === 'bwrap') {
      // In bubblewrap the agent's PID namespace dies with its worker, the escapes with it.
      await until(
        async () => liveSleeps([...sleeps(n(4131)), n(4139)]).length === 0 || null,
        10_000,
        'the sandbox to die with its worker',
      );
    } else {
      // The escapes outlive their worker: nothing but their cgroup ties them to it.
      expect(liveSleeps(sleeps(n(4131))).length).toBe(3);
    }
    const second = await startWorkerProcess({
      redisUrl,
      prefix: h.prefix,
      env,
      stateDir: h.stateDir,
      leaseTtl: '2s',
      stalledInterval: '1s',
    });
    expect(liveSleeps([...sleeps(n(4131)), n(4139)])).toEqual([]);
    const view = await turnEnded(h.runtime, sessionId);
    expect(view.state).toBe('failed');
    expect(sandboxes(view)).toEqual([mode]);
    second.kill('SIGTERM');
    await second.exited;
  });
});
