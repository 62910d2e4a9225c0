import { tmpdir } from 'node:os';
import { afterAll, describe, expect, it } from 'vitest';
import { findProcessesByMarker } from '../../src/process/index.ts';
import { deploymentPolicy } from '../../src/runtime/deployment-policy.ts';
import { InputError, Runtime } from '../../src/runtime/runtime.ts';
import type { SessionWorker } from '../../src/runtime/worker.ts';
import { SANDBOX_MODES, useWorkerSandbox } from '../support/processes.ts';
import { liveSleeps } from '../support/ps.ts';
import type { PiEnv } from '../support/pi-env.ts';
import {
  agentRecords,
  connector,
  sessionDump,
  turnEnded,
  until,
  type Harness,
  useRuntimeSuite,
} from '../support/runtime.ts';
import type { RedisServer } from '../support/redis.ts';
import { internals } from '../../src/runtime/internals.ts';

/**
 * maxTurnMs: a wall-clock limit per turn (retry policy), capped by the deployment's. At the limit
 * the running attempt goes through the three-stage stop, and the turn ends failed, category timeout.
 */

let redis: RedisServer;
let env: PiEnv;
let h: Harness;

useRuntimeSuite('turn-timeout', {}, (s) => {
  ({ redis, env, h } = s);
});

/** Waits until the agent of the session runs its long tool (pi, bash and both sleeps); returns its marker. */
async function longToolRunning(sessionId: string): Promise<string> {
  await until(
    async () => (await h.runtime.readMessages(sessionId)).some((m) => m.type === 'tool.call'),
    30_000,
    'the long tool to start',
  );
  const [record] = await until(async () => {
    const records = await agentRecords(sessionId);
    return records[0]?.pid != null ? records : null;
  });
  if (record === undefined) throw new Error('no agent process recorded');
  await until(async () => (await findProcessesByMarker(record.marker)).length >= 4, 10_000, 'the tool’s process tree');
  return record.marker;
}

// Once unsandboxed and once in bubblewrap: the three-stage stop at the limit reaches the tool's sleeps either way.
describe.each(SANDBOX_MODES)('maxTurnMs [sandbox %s]', (mode) => {
  useWorkerSandbox(mode);
  let worker: SessionWorker | null = null;
  afterAll(async () => {
    await worker?.close(2000);
  });

  it('a turn past its limit during a long bash tool ends failed (timeout) with no process of its tree left', async () => {
    worker ??= await h.startWorker();
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Sleep a long time',
      options: { provider: 'fake', model: 'long-tool-grandchild', cwd: env.cwd },
    });
    const marker = await longToolRunning(sessionId);
    // The limit set now is already behind the turn's start: it fires at once (the policy reaches the holder by pub/sub).
    const set = await h.runtime.setPolicy({ maxTurnMs: 1000 }, sessionId);
    expect(set.ok).toBe(true);

    const session = await turnEnded(h.runtime, sessionId);
    expect(session.state).toBe('failed');
    expect(session.context?.turn).toMatchObject({ status: 'failed', failureReason: 'turn_timeout' });
    expect(session.context?.turn?.attempts.map((a) => [a.outcome, a.category, a.sandbox])).toEqual([
      ['failed', 'timeout', mode],
    ]);
    expect(session.context?.lastFailure).toMatchObject({ category: 'timeout' });
    expect(await findProcessesByMarker(marker)).toEqual([]);
    expect(await agentRecords(sessionId)).toEqual([]);
    expect(liveSleeps([1001, 1002])).toEqual([]);
    // The attempt ends once in the log (issue 28): the running bash call closed, then the timeout.
    const log = await h.runtime.readMessages(sessionId);
    const toolCallId = (log.find((m) => m.type === 'tool.call')?.content as { toolCallId: string }).toolCallId;
    expect(log.slice(-2).map((m) => m.type)).toEqual(['tool.failed', 'terminal.failed']);
    expect(log.at(-2)?.content).toMatchObject({ toolCallId, error: 'the attempt failed: timeout' });
    expect(log.at(-1)?.content).toMatchObject({ category: 'timeout' });
    expect(log.filter((m) => m.type.startsWith('terminal.'))).toHaveLength(1);
  });

  it("the deployment's maxTurnMs wins: a session that asks for none is stopped at it, and a caller cannot ask for more", async () => {
    const policy = deploymentPolicy({ workspace: tmpdir(), policy: { maxTurnMs: 4000 } });
    const { connect, closeAll } = connector(redis.url);
    const runtime = new Runtime({ connect, prefix: h.prefix, policy });
    try {
      // Refused before anything is written.
      await expect(
        runtime.enqueue({ sessionId: 'too-long', prompt: 'x', retryPolicy: { maxTurnMs: 60_000 } }),
      ).rejects.toMatchObject({
        name: 'InputError',
        issues: [
          {
            field: 'retryPolicy.maxTurnMs',
            message: "60000 is above this deployment's maximum of 4000 ms (policy.maxTurnMs)",
          },
        ],
      });
      await expect(
        runtime.enqueue({ sessionId: 'no-limit', prompt: 'x', retryPolicy: { maxTurnMs: 0 } }),
      ).rejects.toBeInstanceOf(InputError);
      expect(await sessionDump(internals(h.runtime).redis, internals(h.runtime).keys, 'too-long')).toMatchObject({
        meta: {},
        snapshot: null,
        inbox: [],
      });
      expect(await runtime.setPolicy({ maxTurnMs: 600_000 })).toMatchObject({
        ok: false,
        errors: [{ field: 'maxTurnMs' }],
      });

      // A worker of that deployment stops a turn that named no limit at the deployment's.
      await worker?.close(2000);
      worker = await h.startWorker({ policy });
      const { sessionId } = await runtime.enqueue({
        prompt: 'Sleep a long time',
        options: { provider: 'fake', model: 'long-tool-grandchild', cwd: env.cwd },
      });
      const session = await turnEnded(runtime, sessionId, 1, 60_000);
      expect(session.context?.turn).toMatchObject({ status: 'failed', failureReason: 'turn_timeout' });
      expect(session.context?.policy.maxTurnMs).toBe(4000);
      expect(session.context?.turn?.attempts.map((a) => a.sandbox)).toEqual([mode]);
      expect(await agentRecords(sessionId)).toEqual([]);
      expect(liveSleeps([1001, 1002])).toEqual([]);
    } finally {
      await runtime.close();
      closeAll();
    }
  });
});
