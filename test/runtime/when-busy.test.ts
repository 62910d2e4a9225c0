import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { ConflictError, hasErrorCode, InputError, SessionBusyError } from '../../src/errors.ts';
import { findProcessesByMarker } from '../../src/process/index.ts';
import { deploymentPolicy } from '../../src/runtime/deployment-policy.ts';
import { Runtime } from '../../src/runtime/runtime.ts';
import type { SessionWorker } from '../../src/runtime/worker.ts';
import { runCli } from '../support/cli.ts';
import type { FakeModelServer } from '../support/fake-model-server.ts';
import type { PiEnv } from '../support/pi-env.ts';
import {
  agentRecords,
  expectWholeLog,
  turnEnded,
  until,
  useRuntimeSuite,
  type AgentRecord,
  type Harness,
  type RuntimeSuite,
} from '../support/runtime.ts';
import { tmpdir } from 'node:os';

/**
 * A prompt sent while the session is busy (`whenBusy`): `reject` refused with nothing written, `interrupt` stopping
 * the running turn (cancelled, reason `interrupted`) and running next in the same conversation, and the deployment
 * policy restricting the strategies. Real redis-server, BullMQ, pi against the fake model. Single Redis only: the
 * "nothing written" check dumps every key of the server.
 */

const NEXT = 'when-busy-next';
const FAILS = 'when-busy-500';

let server: FakeModelServer;
let env: PiEnv;
let h: Harness;
let cliEnv: RuntimeSuite['cliEnv'];
let raw: Redis;
let worker: SessionWorker | null = null;

/** Every key of the server with its value (DUMP) and type: equal before and after means nothing was written. */
async function keyDump(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  let cursor = '0';
  do {
    const [next, keys] = await raw.scan(cursor, 'COUNT', 1000);
    cursor = next;
    for (const key of keys) {
      const dumped = await raw.dumpBuffer(key);
      out[key] = dumped === null ? '(gone)' : dumped.toString('base64');
    }
  } while (cursor !== '0');
  return out;
}

/** The session's agent once its long tool runs: pi, bash and its two background sleeps (it would sleep 1000 s). */
async function toolRunning(sessionId: string): Promise<AgentRecord> {
  const [record] = await until(async () => {
    const records = await agentRecords(sessionId);
    return records[0]?.pid != null ? records : null;
  });
  if (record === undefined) throw new Error('no agent process recorded');
  await until(async () => (await findProcessesByMarker(record.marker)).length >= 4, 30_000, 'the tool to run');
  return record;
}

/** The dump once two taken 100 ms apart agree: a job or session of an earlier step may still be finishing its writes. */
async function quietDump(): Promise<Record<string, string>> {
  let last = await keyDump();
  for (let i = 0; i < 50; i += 1) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    const next = await keyDump();
    if (JSON.stringify(next) === JSON.stringify(last)) return next;
    last = next;
  }
  throw new Error('the server never went quiet: something keeps writing');
}

describe('whenBusy', () => {
  useRuntimeSuite(
    'when-busy',
    { scripts: { [NEXT]: { text: 'The next turn ran.' }, [FAILS]: { status: 500 } } },
    (s) => {
      ({ server, env, h, cliEnv } = s);
      raw = h.connect('when-busy-dump');
      worker = null;
    },
  );

  it('reject while prompts wait (no worker yet): SessionBusyError from the library, exit 1 from the CLI, nothing written', async () => {
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'First',
      options: { provider: 'fake', model: NEXT, cwd: env.cwd },
    });
    const before = await quietDump();

    const error = await h.runtime
      .enqueue({ sessionId, prompt: 'Second', whenBusy: 'reject' }, { mustExist: true })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SessionBusyError);
    expect(error).toBeInstanceOf(ConflictError);
    expect(hasErrorCode(error, 'conflict')).toBe(true);
    expect(error).toMatchObject({ state: 'queued', waiting: 1 });
    expect((error as Error).message).toContain('whenBusy "reject"');
    expect(await keyDump()).toEqual(before);

    const cli = await runCli(['enqueue', 'Third', '--session', sessionId, '--when-busy', 'reject'], { env: cliEnv() });
    expect(cli.exitCode).toBe(1);
    expect(cli.stderr).toContain(`session "${sessionId}" is busy (queued, 1 prompt waiting)`);
    expect(await keyDump()).toEqual(before);

    // Once a worker runs, the waiting prompt is the only turn: nothing of the refused ones ran. (It also leaves the
    // server quiet for the next test's key dump, which a session still running would change.)
    worker ??= await h.startWorker();
    const ended = await turnEnded(h.runtime, sessionId);
    expect(ended.state).toBe('completed');
    expect(await h.runtime.queuedPrompts(sessionId)).toEqual([]);
    expect(new Set((await h.runtime.readMessages(sessionId)).map((m) => m.turn))).toEqual(new Set([1]));
  });

  it('reject while a turn is parked in backoff: refused, nothing written; once the session is idle it is accepted', async () => {
    worker ??= await h.startWorker();
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Fail once',
      options: { provider: 'fake', model: FAILS, cwd: env.cwd },
      retryPolicy: { initialDelayMs: 60_000, maxDelayMs: 60_000, jitter: 'none', maxAttempts: 3 },
    });
    await until(
      async () => {
        const s = await h.runtime.getSession(sessionId);
        return s?.state === 'backoff' && s.heldBy === null;
      },
      30_000,
      'the session to park in backoff',
    );
    const before = await quietDump();
    const error = await h.runtime
      .enqueue({ sessionId, prompt: 'Again', whenBusy: 'reject' }, { mustExist: true })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'conflict', state: 'backoff', waiting: 0 });
    expect(await keyDump()).toEqual(before);

    await h.runtime.cancel(sessionId, 'done with it');
    expect((await turnEnded(h.runtime, sessionId)).state).toBe('cancelled');
    // Idle now: a rejecting prompt is just the next turn.
    const next = await h.runtime.enqueue(
      { sessionId, prompt: 'Now', options: { model: NEXT }, whenBusy: 'reject' },
      { mustExist: true },
    );
    expect(next.turn).toBe(2);
    expect((await turnEnded(h.runtime, sessionId, 2)).state).toBe('completed');
  });

  it('interrupt during a long bash tool: the turn ends cancelled (interrupted), the new prompt runs next in the same conversation, no process left', async () => {
    worker ??= await h.startWorker();
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Remember the word walnut',
      options: { provider: 'fake', model: NEXT, cwd: env.cwd },
    });
    expect((await turnEnded(h.runtime, sessionId)).state).toBe('completed');
    await h.runtime.enqueue(
      { sessionId, prompt: 'Sleep a long time', options: { model: 'long-tool-grandchild' } },
      { mustExist: true },
    );
    const record = await toolRunning(sessionId);

    // A rejecting prompt is refused while the turn runs.
    await expect(
      h.runtime.enqueue({ sessionId, prompt: 'No', whenBusy: 'reject' }, { mustExist: true }),
    ).rejects.toMatchObject({ code: 'conflict', state: 'running' });

    const { turn } = await h.runtime.enqueue(
      { sessionId, prompt: 'Forget it, say something else', options: { model: NEXT }, whenBusy: 'interrupt' },
      { mustExist: true },
    );
    expect(turn).toBe(3);

    // Turn 3 ends long before the tool's 1000 s sleep would have (turnEnded waits 60 s at most).
    const third = await turnEnded(h.runtime, sessionId, 3);
    expect(third.state).toBe('completed');
    expect(await findProcessesByMarker(record.marker)).toEqual([]);
    expect(await agentRecords(sessionId)).toEqual([]);
    expect(third.cancelRequested).toBe(false);

    const log = await h.runtime.readMessages(sessionId);
    expectWholeLog(log);
    const interrupted = log.filter((m) => m.turn === 2 && m.type.startsWith('terminal.'));
    expect(interrupted.map((m) => [m.type, m.content])).toEqual([['terminal.cancelled', { reason: 'interrupted' }]]);
    expect(log.filter((m) => m.turn === 2 && m.type === 'tool.failed').map((m) => m.content)).toMatchObject([
      { error: 'the attempt was cancelled' },
    ]);
    expect(log.filter((m) => m.turn === 3).at(-1)?.type).toBe('terminal.completed');
    // The same conversation: turn 3 resumes the agent's session, whose first prompt its model request carries.
    expect(log.filter((m) => m.turn === 3 && m.type.startsWith('session.')).map((m) => m.type)).toEqual([
      'session.resumed',
    ]);
    const asked = server.requestsFor(NEXT).map((r) => JSON.stringify(r.body.messages));
    expect(asked.at(-1)).toContain('Remember the word walnut');
    expect(asked.at(-1)).toContain('Forget it, say something else');
  });

  it('interrupt during the first turn, once its tool ran: the next turn resumes the conversation the first one started', async () => {
    worker ??= await h.startWorker();
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Sleep a long time first',
      options: { provider: 'fake', model: 'long-tool-grandchild', cwd: env.cwd },
    });
    // The tool runs, so pi has written its conversation (with the prompt).
    await toolRunning(sessionId);
    await h.runtime.enqueue(
      { sessionId, prompt: 'Never mind that, answer now', options: { model: NEXT }, whenBusy: 'interrupt' },
      { mustExist: true },
    );
    expect((await turnEnded(h.runtime, sessionId, 2)).state).toBe('completed');

    const log = await h.runtime.readMessages(sessionId);
    expectWholeLog(log);
    expect(log.filter((m) => m.turn === 1 && m.type.startsWith('terminal.')).map((m) => m.type)).toEqual([
      'terminal.cancelled',
    ]);
    const first = log.find((m) => m.turn === 1 && m.type === 'session.started');
    const second = log.filter((m) => m.turn === 2 && m.type.startsWith('session.'));
    expect(second.map((m) => m.type)).toEqual(['session.resumed']);
    expect(second[0]?.content).toMatchObject({ sessionId: (first?.content as { sessionId: string }).sessionId });
    const asked = JSON.stringify(server.requestsFor(NEXT).at(-1)?.body.messages);
    expect(asked).toContain('Sleep a long time first');
    expect(asked).toContain('Never mind that, answer now');
  });

  it('rollback on a worker without workspaces: the turn is interrupted, the log says it was not taken back', async () => {
    worker ??= await h.startWorker();
    // No cwd: the session could have a workspace, but this worker runs none (it runs in the deployment's workspace).
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Remember the word hazelnut',
      options: { provider: 'fake', model: NEXT },
    });
    expect((await turnEnded(h.runtime, sessionId)).state).toBe('completed');
    await h.runtime.enqueue(
      { sessionId, prompt: 'Sleep a long time', options: { model: 'long-tool-grandchild' } },
      { mustExist: true },
    );
    const record = await toolRunning(sessionId);
    await h.runtime.enqueue(
      { sessionId, prompt: 'Take that back', options: { model: NEXT }, whenBusy: 'rollback' },
      { mustExist: true },
    );
    expect((await turnEnded(h.runtime, sessionId, 3)).state).toBe('completed');
    expect(await findProcessesByMarker(record.marker)).toEqual([]);
    const log = await h.runtime.readMessages(sessionId);
    expectWholeLog(log);
    expect(log.filter((m) => m.turn === 2 && m.type.startsWith('terminal.')).map((m) => m.content)).toEqual([
      { reason: 'interrupted' },
    ]);
    expect(log.some((m) => m.type === 'workspace.undone')).toBe(false);
    expect(log.filter((m) => m.type === 'workspace.not_undone').map((m) => [m.turn, m.content])).toEqual([
      [
        2,
        {
          turn: 2,
          reason:
            'interrupted by a whenBusy "rollback" prompt but not taken back: the session runs without a workspace',
        },
      ],
    ]);
    // Not taken back: turn 3 goes on in the same conversation, turn 2 included.
    const asked = server.requestsFor(NEXT).map((r) => JSON.stringify(r.body.messages));
    expect(asked.at(-1)).toContain('hazelnut');
    expect(asked.at(-1)).toContain('Sleep a long time');
  });

  it('interrupt on an idle session is a plain enqueue: nothing is cancelled', async () => {
    worker ??= await h.startWorker();
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Hello',
      options: { provider: 'fake', model: NEXT, cwd: env.cwd },
    });
    expect((await turnEnded(h.runtime, sessionId)).state).toBe('completed');
    await h.runtime.enqueue({ sessionId, prompt: 'Again', whenBusy: 'interrupt' }, { mustExist: true });
    const second = await turnEnded(h.runtime, sessionId, 2);
    expect(second.state).toBe('completed');
    expect(second.cancelRequested).toBe(false);
    expect((await h.runtime.readMessages(sessionId)).some((m) => m.type === 'terminal.cancelled')).toBe(false);
  });

  it('the deployment policy restricts the strategies: a strategy it does not list is refused naming the field', async () => {
    const strict = new Runtime({
      connect: h.connect,
      prefix: h.prefix,
      policy: deploymentPolicy({ workspace: tmpdir(), policy: { whenBusy: ['enqueue', 'reject'] } }),
    });
    try {
      const error = await strict
        .enqueue({ prompt: 'Hi', options: { provider: 'fake', model: NEXT, cwd: env.cwd }, whenBusy: 'interrupt' })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InputError);
      expect((error as InputError).issues).toEqual([
        {
          field: 'whenBusy',
          message: '"interrupt" is not allowed by this deployment (policy.whenBusy: enqueue, reject)',
        },
      ]);
      const bad = await h.runtime.enqueue({ prompt: 'Hi', whenBusy: 'sometimes' } as never).catch((e: unknown) => e);
      expect((bad as InputError).issues.map((i) => i.field)).toEqual(['whenBusy']);
    } finally {
      await strict.close();
    }
    expect(() => deploymentPolicy({ workspace: tmpdir(), policy: { whenBusy: ['reject'] } })).toThrow(/enqueue/);
  });
});
