import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { InputError } from '../../src/errors.ts';
import { findProcessesByMarker } from '../../src/process/index.ts';
import type { StoredMessage } from '../../src/runtime/store/session-store.ts';
import type { WorkspaceConfig } from '../../src/workspace/index.ts';
import { runCli } from '../support/cli.ts';
import type { FakeModelServer } from '../support/fake-model-server.ts';
import { runModel } from '../support/workspace-model.ts';
import {
  agentRecords,
  expectWholeLog,
  piHostOptions,
  turnEnded,
  until,
  useRuntimeSuite,
  type Harness,
  type RuntimeSuite,
} from '../support/runtime.ts';
import { workspacesIn } from '../workspace/support.ts';
import { internals } from '../../src/runtime/internals.ts';
import { lifecycleKeys } from '../../src/runtime/lifecycle/keys.ts';
import { whenBusyField } from '../../src/runtime/counters.ts';
import type { Redis } from 'ioredis';

/**
 * `whenBusy: "rollback"` in a workspace session (docs/workspaces.md "Rollback"): the running turn is interrupted
 * (cancelled, reason `interrupted`), then taken back — files and pi's conversation — before the new prompt runs.
 * Real pi against the fake model, real git, real Redis and BullMQ, one in-process worker with workspaces.
 */

const MODEL = 'ws-rollback';

let server: FakeModelServer;
let h: Harness;
let config: WorkspaceConfig;
let cliEnv: RuntimeSuite['cliEnv'];

let raw: Redis | undefined;
const redis = (): Redis => (raw ??= h.connect('when-busy-rollback'));

const file = (sessionId: string, name: string) => join(config.root, sessionId, name);

/** The fake model's requests whose conversation holds `marker`, as JSON. */
function asked(marker: string): string[] {
  return server
    .requestsFor(MODEL)
    .map((r) => JSON.stringify(r.body.messages ?? []))
    .filter((json) => json.includes(marker));
}

/** Waits until the turn's tool has written `name` (the tool then sleeps), and returns the agent's marker. */
async function toolRunning(sessionId: string, name: string): Promise<string> {
  await until(async () => existsSync(file(sessionId, name)), 60_000, `the tool to write ${name}`);
  const [record] = await until(async () => {
    const records = await agentRecords(sessionId);
    return records[0]?.pid != null ? records : null;
  });
  if (record === undefined) throw new Error('no agent process recorded');
  return record.marker;
}

const ofType = (log: readonly StoredMessage[], type: string) => log.filter((m) => m.type === type);

describe('whenBusy "rollback"', () => {
  useRuntimeSuite('when-busy-rollback', { scripts: { [MODEL]: runModel() } }, async (s) => {
    ({ server, h, cliEnv } = s);
    raw = undefined;
    config = workspacesIn(s.tempDir('ws-rollback'));
    await h.startWorker({ workspaces: config, agentOptions: { pi: piHostOptions(s.env, h.stateDir) } });
  });

  it('during a long tool of turn 2: turn 2 ends interrupted, turn 1’s files and conversation come back, then turn 3 runs', async () => {
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'RUN: echo one > a.txt # first-turn',
      options: { provider: 'fake', model: MODEL },
    });
    expect((await turnEnded(h.runtime, sessionId, 1)).state).toBe('completed');
    await h.runtime.enqueue({ sessionId, prompt: 'RUN: echo two > b.txt; sleep 1000 # second-turn' });
    const marker = await toolRunning(sessionId, 'b.txt');

    const { turn } = await h.runtime.enqueue(
      { sessionId, prompt: 'RUN: ls > list.txt # after-rollback', whenBusy: 'rollback' },
      { mustExist: true },
    );
    expect(turn).toBe(3);
    const third = await turnEnded(h.runtime, sessionId, 3);
    expect(third.state).toBe('completed');
    expect(await findProcessesByMarker(marker)).toEqual([]);
    expect(await agentRecords(sessionId)).toEqual([]);

    // The files: turn 1's, and what turn 3 made; b.txt (turn 2's) is gone.
    expect(readFileSync(file(sessionId, 'a.txt'), 'utf8')).toBe('one\n');
    expect(existsSync(file(sessionId, 'b.txt'))).toBe(false);
    const list = readFileSync(file(sessionId, 'list.txt'), 'utf8').split('\n');
    expect(list).toContain('a.txt');
    expect(list).not.toContain('b.txt');

    const log = await h.runtime.readMessages(sessionId);
    expectWholeLog(log);
    expect(log.filter((m) => m.turn === 2 && m.type.startsWith('terminal.')).map((m) => m.content)).toEqual([
      { reason: 'interrupted' },
    ]);
    const undone = ofType(log, 'workspace.undone');
    expect(undone.map((m) => [m.turn, m.content])).toEqual([
      [2, { turn: 2, to: 1, snapshot: expect.any(String), rollback: true }],
    ]);
    // Told after turn 2's end and before turn 3's first message.
    const cancelledSeq = log.find((m) => m.turn === 2 && m.type === 'terminal.cancelled')?.seq ?? Infinity;
    const thirdSeq = log.find((m) => m.turn === 3)?.seq ?? -Infinity;
    expect(undone[0]!.seq).toBeGreaterThan(cancelledSeq);
    expect(undone[0]!.seq).toBeLessThan(thirdSeq);
    // The same agent conversation, at turn 1's end: turn 3's requests hold turn 1 and not turn 2.
    expect(log.filter((m) => m.turn === 3 && m.type.startsWith('session.')).map((m) => m.type)).toEqual([
      'session.resumed',
    ]);
    const third3 = asked('after-rollback');
    expect(third3.length).toBeGreaterThan(0);
    for (const json of third3) {
      expect(json).toContain('first-turn');
      expect(json).not.toContain('second-turn');
    }

    // The strategy metric counts it (the fleet counter the metrics read).
    const counters = lifecycleKeys(internals(h.runtime).keys).counters;
    expect(Number(await redis().hget(counters, whenBusyField('rollback', 'interrupted')))).toBeGreaterThanOrEqual(1);
  }, 180_000);

  it('during the first turn: back to the session’s start, and the next prompt starts a new conversation', async () => {
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'RUN: echo one > a.txt; sleep 1000 # only-turn',
      options: { provider: 'fake', model: MODEL },
    });
    await toolRunning(sessionId, 'a.txt');
    const cli = await runCli(
      ['enqueue', 'RUN: ls -a > list.txt # after-first', '--session', sessionId, '--when-busy', 'rollback'],
      { env: cliEnv() },
    );
    expect(cli.exitCode).toBe(0);
    expect((await turnEnded(h.runtime, sessionId, 2)).state).toBe('completed');
    expect(existsSync(file(sessionId, 'a.txt'))).toBe(false);
    expect(readFileSync(file(sessionId, 'list.txt'), 'utf8')).not.toContain('a.txt');
    const log = await h.runtime.readMessages(sessionId);
    expectWholeLog(log);
    expect(ofType(log, 'workspace.undone').map((m) => m.content)).toEqual([
      { turn: 1, to: 0, snapshot: expect.any(String), rollback: true },
    ]);
    expect(log.filter((m) => m.turn === 2 && m.type.startsWith('session.')).map((m) => m.type)).toEqual([
      'session.started',
    ]);
    const firstAgent = log.find((m) => m.turn === 1 && m.type === 'session.started')?.content;
    const secondAgent = log.find((m) => m.turn === 2 && m.type === 'session.started')?.content;
    expect(secondAgent).not.toEqual(firstAgent);
    const next = asked('after-first');
    expect(next.length).toBeGreaterThan(0);
    for (const json of next) expect(json).not.toContain('only-turn');
    expect(await agentRecords(sessionId)).toEqual([]);
  }, 180_000);

  it('a session in a caller-named cwd: refused naming whenBusy, nothing stored', async () => {
    const cwd = h.stateDir;
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Hello',
      options: { provider: 'fake', model: MODEL, cwd },
    });
    expect((await turnEnded(h.runtime, sessionId, 1)).state).toBe('completed');
    const error = await h.runtime
      .enqueue({ sessionId, prompt: 'Again', whenBusy: 'rollback' }, { mustExist: true })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InputError);
    expect((error as InputError).issues).toEqual([
      { field: 'whenBusy', message: expect.stringContaining('"rollback" needs a workspace session') },
    ]);
    const meta = internals(h.runtime).keys.session(sessionId, 'meta');
    expect(await redis().hget(meta, 'prompts')).toBe('1');
    // A new session that names a cwd: refused the same way, not created.
    const fresh = await h.runtime
      .enqueue({ prompt: 'Hi', options: { provider: 'fake', model: MODEL, cwd }, whenBusy: 'rollback' })
      .catch((e: unknown) => e);
    expect((fresh as InputError).issues.map((i) => i.field)).toEqual(['whenBusy']);
    const cli = await runCli(['enqueue', 'Again', '--session', sessionId, '--when-busy', 'rollback'], {
      env: cliEnv(),
    });
    expect(cli.exitCode).toBe(2);
    expect(cli.stderr).toContain('whenBusy');
    expect(await redis().hget(meta, 'prompts')).toBe('1');
  }, 120_000);
});
