import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { InputError } from '../../src/errors.ts';
import { deploymentPolicy } from '../../src/runtime/deployment-policy.ts';
import { internals } from '../../src/runtime/internals.ts';
import { markerScope, reapOrphans } from '../../src/runtime/orphans.ts';
import { RuntimeMetrics } from '../../src/runtime/metrics.ts';
import { Runtime } from '../../src/runtime/runtime.ts';
import type { StoredMessage } from '../../src/runtime/store/session-store.ts';
import type { SessionWorker } from '../../src/runtime/worker.ts';
import { runCli } from '../support/cli.ts';
import { hasToolResult, type FakeModelServer, type ScriptContext } from '../support/fake-model-server.ts';
import type { PiEnv } from '../support/pi-env.ts';
import {
  expectWholeLog,
  turnEnded,
  until,
  useRuntimeSuite,
  type Harness,
  type RuntimeSuite,
} from '../support/runtime.ts';
import { killAllWorkerProcesses, startWorkerProcess, type WorkerProcessOptions } from '../support/worker-process.ts';

/**
 * whenBusy "steer" with pi, whose channel is native (its RPC mode's `steer`): a steer accepted while a tool runs
 * reaches the model in the same turn once the tool is done, durably (a worker killed between accepting and
 * delivering: the next one delivers it once); refused when the deployment policy does not allow it. Real
 * redis-server, BullMQ, pi against the fake model. The tool waits for a gate file the test creates: no timing.
 */

const WAIT = 'steer-wait';
const MANY = 'steer-many';
const MANY_COUNT = 50;
const gates = mkdtempSync(join(tmpdir(), 'sessiond-steer-gates-'));

/** The gate a prompt names (`gate-<n>`), or null. */
function gateOf(ctx: ScriptContext): string | null {
  return /gate-\d+/.exec(JSON.stringify(ctx.body.messages ?? []))?.[0] ?? null;
}

/** A request carrying a steer (`STEER-…`): answered with the steers it saw, in order; else the tool waits for its gate. */
function waitScript(ctx: ScriptContext) {
  const steers = JSON.stringify(ctx.body.messages ?? []).match(/STEER-\d+/g);
  if (steers !== null) return { text: `Steered: ${steers.join(' ')}.` };
  if (hasToolResult(ctx.body)) return { text: 'The gate opened.' };
  const gate = join(gates, gateOf(ctx) ?? 'gate-none');
  return {
    toolCalls: [{ name: 'bash', arguments: { command: `while [ ! -e ${gate} ]; do sleep 0.1; done; echo opened` } }],
  };
}

/**
 * Many steers: the tool waits for its gate; then, until a request carries all MANY_COUNT steers (`MANY-…`), a quick
 * tool call (pi takes the steers that reached it since at that tool boundary); then the steers it saw, in order.
 * So the turn ends only once pi took every steer, however they reached it: no race with the turn's end.
 */
function manyScript(ctx: ScriptContext) {
  const seen = JSON.stringify(ctx.body.messages ?? []).match(/MANY-\d+/g) ?? [];
  if (seen.length >= MANY_COUNT) return { text: `Steered: ${seen.join(' ')}.` };
  if (hasToolResult(ctx.body)) return { toolCalls: [{ name: 'bash', arguments: { command: 'echo more' } }] };
  return waitScript(ctx);
}

let server: FakeModelServer;
let env: PiEnv;
let h: Harness;
let cliEnv: RuntimeSuite['cliEnv'];
let worker: SessionWorker | null = null;
let workerOptions: WorkerProcessOptions;

const steered = (log: StoredMessage[]) => log.filter((m) => m.type === 'prompt.steered');
const open = (gate: string) => writeFileSync(join(gates, gate), '');

/** Until the running attempt's tool waits at its gate (its tool.call is in the log). */
async function toolRunning(sessionId: string): Promise<void> {
  await until(
    async () => (await h.runtime.readMessages(sessionId)).some((m) => m.type === 'tool.call'),
    60_000,
    'the tool to run',
  );
}

describe('whenBusy "steer" with pi (native)', () => {
  useRuntimeSuite(
    'steer',
    {
      scripts: { [WAIT]: waitScript, [MANY]: manyScript },
      cleanup: async () => {
        await killAllWorkerProcesses();
        if (h !== undefined) await reapOrphans(markerScope(internals(h.runtime).keys.prefix));
        rmSync(gates, { recursive: true, force: true });
      },
    },
    (s) => {
      ({ server, env, h, cliEnv } = s);
      workerOptions = {
        redisUrl: s.redis.url,
        prefix: h.prefix,
        env,
        stateDir: h.stateDir,
        leaseTtl: '2s',
        stalledInterval: '1s',
      };
    },
  );

  it('a steer during a long tool reaches the model in the same turn once the tool is done: prompt.steered via native, no new turn', async () => {
    worker ??= await h.startWorker();
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Wait for gate-1',
      options: { provider: 'fake', model: WAIT, cwd: env.cwd },
    });
    await toolRunning(sessionId);

    const steer = await h.runtime.enqueue(
      { sessionId, prompt: 'STEER-1: use the blue one', whenBusy: 'steer' },
      { mustExist: true },
    );
    expect(steer).toMatchObject({ sessionId, turn: 1, created: false, steered: true });
    // Pending while the tool runs: inspect shows it (the CLI's JSON is the library's SessionView).
    const inspected = await runCli(['inspect', sessionId, '--json'], { env: cliEnv() });
    expect(inspected.exitCode).toBe(0);
    expect((JSON.parse(inspected.stdout) as { steers: unknown }).steers).toEqual([
      { id: steer.promptId, text: 'STEER-1: use the blue one', acceptedAt: expect.any(Number) },
    ]);

    open('gate-1');
    const session = await turnEnded(h.runtime, sessionId, 1);
    expect(session.state).toBe('completed');
    expect(session.context?.turnIndex).toBe(1);
    expect(session.steers).toEqual([]);
    // No failure counted: the turn's one attempt completed.
    expect(session.context?.turn?.attempts.map((a) => a.outcome)).toEqual(['completed']);

    const log = await h.runtime.readMessages(sessionId);
    expectWholeLog(log);
    expect(log.every((m) => m.turn === 1)).toBe(true);
    expect(steered(log).map((m) => m.content)).toEqual([
      { promptId: steer.promptId, via: 'native', at: expect.any(Number) },
    ]);
    // After the tool's result, before the resumed agent's messages; one terminal.
    const types = log.map((m) => m.type);
    expect(types.indexOf('prompt.steered')).toBeGreaterThan(types.indexOf('tool.completed'));
    expect(types.filter((t) => t.startsWith('terminal.'))).toEqual(['terminal.completed']);
    expect(
      log
        .filter((m) => m.type === 'assistant')
        .map((m) => (m.content as { text: string }).text)
        .join(''),
    ).toBe('Steered: STEER-1.');
    // The model saw the steering text in the same conversation, after the tool's result.
    const last = server.requestsFor(WAIT).at(-1);
    const asked = JSON.stringify(last?.body.messages);
    expect(asked).toContain('Wait for gate-1');
    expect(asked).toContain('opened');
    expect(asked).toContain('STEER-1: use the blue one');
    expect(hasToolResult(last!.body)).toBe(true);

    // Counted: the strategy (it went into the running turn) and its latency, once.
    const metrics = await new RuntimeMetrics(h.runtime, { cacheMs: 0 }).render();
    expect(metrics).toMatch(/^sessiond_prompts_when_busy_total\{strategy="steer",effect="steered"\} 1$/m);
    expect(metrics).toMatch(/^sessiond_steer_latency_seconds_count 1$/m);
  });

  it('50 concurrent steers to one session: each delivered once, in the order accepted, in the same turn, batched by pi', async () => {
    worker ??= await h.startWorker();
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Wait for gate-5',
      options: { provider: 'fake', model: MANY, cwd: env.cwd },
    });
    await toolRunning(sessionId);
    const accepted = await Promise.all(
      Array.from({ length: MANY_COUNT }, (_, i) =>
        h.runtime.enqueue({ sessionId, prompt: `MANY-${i}`, whenBusy: 'steer' }, { mustExist: true }),
      ),
    );
    expect(accepted.every((a) => a.steered === true && a.turn === 1)).toBe(true);
    // The order they were accepted in: the session's pending steers, oldest first.
    const pending = (await h.runtime.getSession(sessionId))?.steers ?? [];
    expect(pending.map((p) => p.id).sort()).toEqual(accepted.map((a) => a.promptId).sort());
    open('gate-5');

    const session = await turnEnded(h.runtime, sessionId, 1, 240_000);
    expect(session.state).toBe('completed');
    expect(session.context?.turnIndex).toBe(1);
    expect(session.steers).toEqual([]);
    expect(session.context?.turn?.attempts.map((a) => a.outcome)).toEqual(['completed']);
    const log = await h.runtime.readMessages(sessionId);
    expectWholeLog(log);
    expect(log.every((m) => m.turn === 1)).toBe(true);
    // Each once, in the order accepted, through pi's channel.
    expect(steered(log).map((m) => [m.attempt, m.content])).toEqual(
      pending.map((p) => [1, { promptId: p.id, via: 'native', at: expect.any(Number) }]),
    );
    // The model got every steering text once, in that order, in the same conversation.
    const requests = server.requestsFor(MANY).filter((r) => JSON.stringify(r.body).includes('gate-5'));
    expect(JSON.stringify(requests.at(-1)?.body.messages).match(/MANY-\d+/g)).toEqual(pending.map((p) => p.text));
    // pi took them in batches at its tool boundaries (its steeringMode "all"): one at a time would be a request each.
    expect(requests.length).toBeLessThan(MANY_COUNT);
  });

  it('a steer on an idle session is the next turn (nothing to steer)', async () => {
    worker ??= await h.startWorker();
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Wait for gate-3',
      options: { provider: 'fake', model: WAIT, cwd: env.cwd },
    });
    open('gate-3');
    expect((await turnEnded(h.runtime, sessionId, 1)).state).toBe('completed');
    const next = await h.runtime.enqueue({ sessionId, prompt: 'STEER-3', whenBusy: 'steer' }, { mustExist: true });
    expect(next).toMatchObject({ turn: 2, steered: false });
    expect((await turnEnded(h.runtime, sessionId, 2)).state).toBe('completed');
    expect(steered(await h.runtime.readMessages(sessionId))).toEqual([]);
  });

  it('kill -9 of the worker after the steer was accepted and before it was delivered: the next worker delivers it once', async () => {
    await worker?.close(2000);
    worker = null;
    const first = await startWorkerProcess(workerOptions);
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Wait for gate-4',
      options: { provider: 'fake', model: WAIT, cwd: env.cwd },
      retryPolicy: { initialDelayMs: 200, jitter: 'none' },
    });
    await toolRunning(sessionId);
    // From the CLI: its JSON says the prompt went into the running turn, with the id the log will name.
    const cli = await runCli(['enqueue', 'STEER-4', '--session', sessionId, '--when-busy', 'steer', '--json'], {
      env: cliEnv(),
    });
    expect(cli.exitCode).toBe(0);
    const steer = JSON.parse(cli.stdout) as { promptId: string };
    expect(steer).toEqual({ sessionId, turn: 1, promptId: expect.any(String), steered: true });
    first.kill('SIGKILL');
    expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' });
    // Still pending: accepted (in Redis), not delivered.
    expect((await h.runtime.getSession(sessionId))?.steers.map((s) => s.id)).toEqual([steer.promptId]);
    // The next attempt's tool (if pi runs it before taking the steer) does not wait.
    open('gate-4');

    const second = await startWorkerProcess(workerOptions);
    const session = await turnEnded(h.runtime, sessionId, 1);
    expect(session.state).toBe('completed');
    expect(session.context?.turnIndex).toBe(1);
    expect(session.steers).toEqual([]);
    const log = await h.runtime.readMessages(sessionId);
    expectWholeLog(log);
    const delivered = steered(log);
    expect(delivered.map((m) => [m.turn, (m.content as { promptId: string }).promptId])).toEqual([[1, steer.promptId]]);
    // Delivered by the attempt the next worker ran (the first one's ended interrupted).
    expect(delivered[0]?.attempt).toBe(2);
    expect(
      JSON.stringify(
        server
          .requestsFor(WAIT)
          .filter((r) => JSON.stringify(r.body).includes('gate-4'))
          .at(-1)?.body.messages,
      ),
    ).toContain('STEER-4');
    second.kill('SIGTERM');
    await second.exited;
  });

  it('a deployment policy without "steer" refuses it naming the field; nothing is stored', async () => {
    const strict = new Runtime({
      connect: h.connect,
      prefix: h.prefix,
      policy: deploymentPolicy({ workspace: tmpdir(), policy: { whenBusy: ['enqueue', 'interrupt'] } }),
    });
    try {
      const error = await strict
        .enqueue({ prompt: 'Hi', options: { provider: 'fake', model: WAIT, cwd: env.cwd }, whenBusy: 'steer' })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InputError);
      expect((error as InputError).issues).toEqual([
        {
          field: 'whenBusy',
          message: '"steer" is not allowed by this deployment (policy.whenBusy: enqueue, interrupt)',
        },
      ]);
    } finally {
      await strict.close();
    }
  });
});
