import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { z } from 'zod';
import { createClient, createWorker, defineAgent, type Client, type Worker } from '../../../src/index.ts';
import type { DoctorReport } from '../../../src/interfaces/cli/commands/doctor-action.ts';
import { agentWaitKeys } from '../../../src/runtime/agent-waits.ts';
import { createKeys } from '../../../src/runtime/keys.ts';
import type { SessionSummary } from '../../../src/runtime/inspect.ts';
import { runCli, sessiond } from '../../support/cli.ts';
import { startCliDeployment, type CliDeployment } from '../../support/cli-deployment.ts';

/**
 * A mixed fleet on one real redis-server: a `sessiond worker` process with the built-in agents (real pi
 * against the fake model) and a library worker with only an agent defined here. Every session runs on
 * a worker that has its agent; one whose agent no live worker offers waits, saying so, and runs as soon
 * as such a worker starts.
 */

const echo = defineAgent({
  name: 'echo',
  options: z.object({}),
  async *run({ prompt }) {
    yield { type: 'assistant', content: { text: `echo: ${prompt}` } };
    yield { type: 'terminal.completed', content: { stopReason: 'end' } };
  },
});

let deployment: CliDeployment;
let client: Client;
let library: Worker | null = null;
/** The sessions whose turn the library worker ended. */
const endedByLibrary = new Set<string>();

beforeAll(async () => {
  deployment = await startCliDeployment('agent-routing');
  client = createClient({ redis: deployment.redis.url, prefix: deployment.cliEnv.SESSIOND_PREFIX!, agents: [echo] });
});
afterAll(async () => {
  await library?.close();
  await client?.close();
  await deployment?.stop();
});

async function inspectJson(sessionId: string, env = deployment.cliEnv): Promise<SessionSummary> {
  const result = await runCli(['inspect', sessionId, '--json'], { env });
  expect(result.exitCode, result.stderr).toBe(0);
  return JSON.parse(result.stdout) as SessionSummary;
}

async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs = 90_000,
  describe?: () => Promise<string>,
): Promise<T> {
  for (const deadline = Date.now() + timeoutMs; ;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}${describe === undefined ? '' : `: ${await describe()}`}`);
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
}

describe('workers route by the agents they have', () => {
  it('a session whose agent no live worker offers waits, and inspect and doctor say why; it completes once a worker with that agent starts, beside the CLI worker’s pi sessions', async () => {
    const early = await Promise.all(
      ['a', 'b', 'c'].map((p) => client.sessions.enqueue({ prompt: p, options: { agent: 'echo' } })),
    );
    // The CLI worker (built-in agents only) takes each and hands it back: waiting, no attempt run.
    for (const { sessionId } of early) {
      const waiting = await waitFor(`${sessionId} waiting for echo`, async () => {
        const s = await inspectJson(sessionId);
        return s.waitingFor?.reason === 'agent' ? s : undefined;
      });
      expect(waiting.state).toBe('waiting');
      expect(waiting.waitingFor).toMatchObject({ limit: 'agent:echo', reason: 'agent', agent: 'echo' });
      expect(waiting.turn?.attempts).toEqual([]);
    }
    const text = await runCli(['inspect', early[0]!.sessionId], { env: deployment.cliEnv });
    expect(text.stdout).toContain('waiting for a worker offering agent echo since');

    const doctor = await runCli(['doctor', '--json'], { env: deployment.cliEnv });
    const report = JSON.parse(doctor.stdout) as DoctorReport;
    expect(doctor.exitCode).toBe(1);
    expect(report.agentWaits).toEqual([
      {
        agent: 'echo',
        sessions: 3,
        oldest: expect.arrayContaining([expect.objectContaining({ since: expect.any(Number) })]),
      },
    ]);
    expect(report.problems).toContainEqual({
      what: expect.stringMatching(/^3 sessions wait for a worker offering agent echo, and no live worker offers it/),
      fix: expect.stringContaining('start a worker that has echo'),
    });
    expect((await runCli(['doctor'], { env: deployment.cliEnv })).stdout).toContain(
      'waiting for a worker offering agent echo: 3 sessions',
    );

    // A worker with only the library's agent joins: the waiting sessions run there, and new sessions of
    // both agents (taken by either worker first) each run on a worker that has their agent.
    library = createWorker({
      redis: deployment.redis.url,
      prefix: deployment.cliEnv.SESSIOND_PREFIX!,
      agents: [echo],
      offers: ['echo'],
      concurrency: 2,
      heartbeatMs: 500,
      leaseTtlMs: 3000,
      stalledIntervalMs: 1000,
      pollMs: 250,
      // Workspaces off: routing is what this tests; the default would write under the host's state dir.
      workspaces: false,
    });
    library.on('turnEnded', (turn) => endedByLibrary.add(turn.sessionId));
    await library.start();
    const lateEcho = await Promise.all(
      ['d', 'e', 'f', 'g'].map((p) => client.sessions.enqueue({ prompt: p, options: { agent: 'echo' } })),
    );
    const pi = await Promise.all(
      ['1', '2', '3'].map(async (p) => {
        const queued = await runCli(['enqueue', ...deployment.model('text'), '--json', `Say hello ${p}`], {
          env: deployment.cliEnv,
        });
        expect(queued.exitCode, queued.stderr).toBe(0);
        return JSON.parse(queued.stdout) as { sessionId: string };
      }),
    );
    const echoIds = [...early, ...lateEcho].map((s) => s.sessionId);
    for (const sessionId of [...echoIds, ...pi.map((s) => s.sessionId)]) {
      const state = await waitFor(
        `${sessionId} settled`,
        async () => {
          const view = await client.session(sessionId).inspect();
          return view !== null && ['completed', 'failed', 'cancelled'].includes(view.state) ? view.state : undefined;
        },
        120_000,
        async () => JSON.stringify(await inspectJson(sessionId)),
      );
      expect(state, sessionId).toBe('completed');
      // None failed: one attempt, which completed.
      const log = await client.session(sessionId).messages();
      expect(new Set(log.map((m) => m.attempt)), sessionId).toEqual(new Set([1]));
      expect(log.filter((m) => m.type.startsWith('terminal.')).map((m) => m.type)).toEqual(['terminal.completed']);
    }
    expect((await inspectJson(early[0]!.sessionId)).turn?.attempts.map((a) => a.outcome)).toEqual(['completed']);
    for (const sessionId of echoIds) expect(endedByLibrary.has(sessionId), sessionId).toBe(true);
    for (const { sessionId } of pi) expect(endedByLibrary.has(sessionId), sessionId).toBe(false);
    expect(
      (await client.session(early[0]!.sessionId).messages()).map((m) => m.content as { text?: string })[0]?.text,
    ).toBe('echo: a');

    // Nothing waits any more: doctor has no such problem left.
    const after = JSON.parse((await runCli(['doctor', '--json'], { env: deployment.cliEnv })).stdout) as DoctorReport;
    expect(after.agentWaits).toEqual([]);
    expect(after.problems.map((p) => p.what).join('\n')).not.toContain('offering agent');
  }, 400_000);

  it('enqueue --follow says once that no live worker offers the agent, keeps waiting, and completes once one starts', async () => {
    // A prefix of its own, served by a worker that runs codex only.
    const env = { ...deployment.cliEnv, SESSIOND_PREFIX: `${deployment.cliEnv.SESSIOND_PREFIX}-follow` };
    const codexOnly = sessiond(['worker'], { env: { ...env, SESSIOND_WORKER_AGENTS: 'codex' } });
    let withPi: ReturnType<typeof sessiond> | null = null;
    try {
      await waitFor('the codex worker', async () => {
        const report = JSON.parse((await runCli(['doctor', '--json'], { env })).stdout) as DoctorReport;
        return report.workers.some((w) => w.live && w.agents?.join() === 'codex') ? true : undefined;
      });
      const follow = sessiond(['enqueue', ...deployment.model('text'), '--follow', 'Say hello'], { env });
      let stderr = '';
      follow.stderr?.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      await waitFor('the notice', async () => (stderr.includes('no live worker offers agent pi') ? true : undefined));
      expect(stderr).toContain('no live worker offers agent pi: turn 1 waits for one.');
      expect(stderr).toContain('runs codex');
      expect(stderr).not.toContain('no live worker can take');
      withPi = sessiond(['worker'], { env });
      const result = await follow;
      expect(result.exitCode, stderr).toBe(0);
      expect(String(result.stdout)).toContain('Hello from the fake LLM.');
      expect(stderr.split('no live worker offers agent pi')).toHaveLength(2);
    } finally {
      for (const worker of [codexOnly, withPi]) {
        worker?.kill('SIGTERM');
        await worker?.catch(() => undefined);
      }
    }
  }, 400_000);

  it('a waiter of an agent no worker offers is forgotten once its session is deleted: the fleet keeps no entry of it', async () => {
    const ghost = defineAgent({
      name: 'ghost',
      options: z.object({}),
      async *run() {
        yield { type: 'terminal.completed', content: { stopReason: 'end' } };
      },
    });
    const asker = createClient({
      redis: deployment.redis.url,
      prefix: deployment.cliEnv.SESSIOND_PREFIX!,
      agents: [echo, ghost],
    });
    const redis = new Redis(deployment.redis.url);
    try {
      const keys = agentWaitKeys(createKeys(deployment.cliEnv.SESSIOND_PREFIX!));
      const { sessionId } = await asker.sessions.enqueue({ prompt: 'anyone?', options: { agent: 'ghost' } });
      await waitFor(`${sessionId} listed as waiting for ghost`, async () =>
        (await redis.zscore(keys.agent('ghost'), sessionId)) === null ? undefined : true,
      );
      expect(await redis.sismember(keys.agents, 'ghost')).toBe(1);
      expect((await asker.session(sessionId).delete({ force: true })).deleted).toBe(true);
      // No worker offers ghost; the workers' wake passes (each heartbeat) forget the entry all the same.
      await waitFor('the ghost waiter forgotten', async () =>
        (await redis.exists(keys.agent('ghost'))) === 0 && (await redis.sismember(keys.agents, 'ghost')) === 0
          ? true
          : undefined,
      );
    } finally {
      redis.disconnect();
      await asker.close();
    }
  }, 120_000);

  it('createWorker told to offer an agent it does not have throws, naming the option', () => {
    expect(() =>
      createWorker({ redis: deployment.redis.url, prefix: 'unused', agents: [echo], offers: ['echo', 'nope'] }),
    ).toThrow('offers: unknown agent "nope"');
    expect(() => createWorker({ redis: deployment.redis.url, prefix: 'unused', offers: [] })).toThrow(
      'offers: must name at least one agent',
    );
  });

  it('a worker told to run an agent it does not know refuses to start, naming the setting', async () => {
    const env = { ...deployment.cliEnv, SESSIOND_WORKER_AGENTS: 'pi,nope' };
    const result = await runCli(['worker'], { env });
    expect(result.exitCode).not.toBe(0);
    expect(result.stderr).toContain('worker.agents (SESSIOND_WORKER_AGENTS): unknown agent "nope"');
  });
});
