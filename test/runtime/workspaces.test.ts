import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import type { WorkspaceConfig } from '../../src/workspace/index.ts';
import { POINTER_FIELD, parsePointer } from '../../src/runtime/session-loop/workspace-attempt.ts';
import { internals } from '../../src/runtime/internals.ts';
import type { PiEnv } from '../support/pi-env.ts';
import { runModel } from '../support/workspace-model.ts';
import { piHostOptions, turnEnded, until, useRuntimeSuite, type Harness } from '../support/runtime.ts';
import { workspacesIn } from '../workspace/support.ts';

/**
 * A session's workspace in the runtime (docs/workspaces.md), with real pi, real git and real Redis,
 * one in-process worker: the files follow the conversation through tool calls, a cancel mid-tool,
 * a failed attempt under `rollback`; sessions never see each other's files; an excluded file is in
 * no snapshot; a delete removes the snapshots; a snapshot over quota fails the turn with `quota`.
 */

const MODEL = 'ws-run';

/** The requests the model got for a prompt containing `marker` (in its last user message or earlier). */
function requestsMentioning(marker: string) {
  return suite.server.requestsFor(MODEL).filter((r) => JSON.stringify(r.body.messages ?? []).includes(marker));
}
const FAILING = 'ws-then-500';
/** One tool call that leaves a process running in the background, then a text answer two seconds later. */
const LEFT_RUNNING = 'ws-left-running';

let suite: { server: import('../support/fake-model-server.ts').FakeModelServer };
let h: Harness;
let env: PiEnv;
let config: WorkspaceConfig;

function options(extra: Record<string, unknown> = {}) {
  return { provider: 'fake', model: MODEL, ...extra };
}

async function pointerOf(sessionId: string) {
  const raw = await h.connect('t').hget(internals(h.runtime).keys.session(sessionId, 'agent'), POINTER_FIELD);
  return parsePointer(raw);
}

/** The files of a snapshot in the store (sessiond's own git; the test reads it with plain git). */
function storeFiles(snapshot: string): string[] {
  const out = execFileSync(
    'git',
    ['--git-dir', config.store, 'ls-tree', '-r', '--name-only', snapshot, '--', 'files/'],
    {
      encoding: 'utf8',
    },
  );
  return out
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => l.slice('files/'.length));
}

/** The store's refs (a session's index is a ref named by its hex-encoded id). */
function storeHas(sessionId: string): boolean {
  return storeRefs().includes(Buffer.from(sessionId).toString('hex'));
}

function storeRefs(): string {
  return execFileSync('git', ['--git-dir', config.store, 'for-each-ref'], { encoding: 'utf8' });
}

/** The labels of a session's snapshots in the store (its index commit's parents), oldest first. */
function snapshotLabels(sessionId: string): string[] {
  const ref = `refs/sessiond/${Buffer.from(sessionId).toString('hex')}`;
  const parents = execFileSync('git', ['--git-dir', config.store, 'rev-parse', `${ref}^@`], { encoding: 'utf8' });
  return parents
    .split('\n')
    .filter((id) => id !== '')
    .map((id) =>
      execFileSync('git', ['--git-dir', config.store, 'log', '-1', '--format=%s', id], { encoding: 'utf8' }).trim(),
    );
}

describe('workspaces in the runtime (one worker)', () => {
  useRuntimeSuite(
    'workspaces',
    {
      scripts: {
        [MODEL]: runModel(),
        // One tool call, then every later request fails: the attempt fails after a recorded tool.
        [FAILING]: [
          { toolCalls: [{ id: 'call_fail_1', name: 'bash', arguments: { command: 'echo kept > kept.txt' } }] },
          { status: 400 },
          { toolCalls: [{ id: 'call_fail_2', name: 'bash', arguments: { command: 'echo again >> again.txt' } }] },
          { text: 'Done.' },
        ],
        [LEFT_RUNNING]: [
          {
            toolCalls: [
              {
                id: 'call_left_1',
                name: 'bash',
                // The tool ends at once; what it left running writes a file a second later and lives on.
                arguments: {
                  command: '(sleep 1; echo late > late.txt; sleep 60) > /dev/null 2>&1 & echo early > early.txt',
                },
              },
            ],
          },
          { text: 'Done.', headersDelayMs: 2500 },
        ],
      },
    },
    async (s) => {
      suite = s;
      ({ h, env } = s);
      const dir = s.tempDir('ws');
      // Only the quota test's file is larger than maxBytes.
      config = workspacesIn(dir, { exclude: ['.env*', '*.pem', 'id_*'], maxBytes: 100_000 });
      await h.startWorker({
        workspaces: config,
        agentOptions: { pi: piHostOptions(env, h.stateDir) },
        sweepIntervalMs: 300,
      });
    },
  );

  it('a session without a cwd works in its own workspace: turn 2 sees turn 1’s file; another session sees neither', async () => {
    const { sessionId } = await h.runtime.enqueue({ prompt: 'RUN: echo one > a.txt', options: options() });
    expect((await turnEnded(h.runtime, sessionId, 1)).state).toBe('completed');
    await h.runtime.enqueue({ sessionId, prompt: 'RUN: cat a.txt >> b.txt; pwd > where.txt' });
    expect((await turnEnded(h.runtime, sessionId, 2)).state).toBe('completed');
    const path = join(config.root, sessionId);
    expect(readFileSync(join(path, 'b.txt'), 'utf8')).toBe('one\n');
    expect(readFileSync(join(path, 'where.txt'), 'utf8').trim()).toBe(path);
    const pointer = await pointerOf(sessionId);
    expect(pointer?.turn).toBe(2);
    expect(storeFiles(pointer?.snapshot ?? '').sort()).toEqual(['a.txt', 'b.txt', 'where.txt']);

    const other = await h.runtime.enqueue({ prompt: 'RUN: ls -a > list.txt', options: options() });
    expect((await turnEnded(h.runtime, other.sessionId, 1)).state).toBe('completed');
    const list = readFileSync(join(config.root, other.sessionId, 'list.txt'), 'utf8').split('\n');
    expect(list).not.toContain('a.txt');
    expect(list).not.toContain('b.txt');
  }, 90_000);

  it('a cancel mid-tool: that tool’s effects are gone (files and conversation), the earlier turn’s stay', async () => {
    const { sessionId } = await h.runtime.enqueue({ prompt: 'RUN: echo one > a.txt', options: options() });
    expect((await turnEnded(h.runtime, sessionId, 1)).state).toBe('completed');
    const path = join(config.root, sessionId);
    await h.runtime.enqueue({ sessionId, prompt: 'RUN: echo two > b.txt; echo x >> a.txt; sleep 30 # cancel-me' });
    await until(async () => readFileSync(join(path, 'a.txt'), 'utf8') === 'one\nx\n', 30_000, 'the tool to append');
    await h.runtime.cancel(sessionId, 'test');
    expect((await turnEnded(h.runtime, sessionId, 2)).state).toBe('cancelled');
    expect(readFileSync(join(path, 'a.txt'), 'utf8')).toBe('one\n');
    expect(existsSync(join(path, 'b.txt'))).toBe(false);
    // Its log ends the attempt once, the copy put back first: the running call closed, then the cancel.
    const turn2 = (await h.runtime.readMessages(sessionId)).filter((m) => m.turn === 2);
    expect(turn2.slice(-2).map((m) => [m.type, m.content])).toEqual([
      ['tool.failed', expect.objectContaining({ error: 'the attempt was cancelled' })],
      ['terminal.cancelled', { reason: 'test' }],
    ]);
    // The next turn's conversation holds turn 1, not the cancelled tool call.
    await h.runtime.enqueue({ sessionId, prompt: 'RUN: cat a.txt > c.txt # after-cancel' });
    expect((await turnEnded(h.runtime, sessionId, 3)).state).toBe('completed');
    expect(readFileSync(join(path, 'c.txt'), 'utf8')).toBe('one\n');
    const next = requestsMentioning('after-cancel');
    expect(next.length).toBeGreaterThan(0);
    for (const r of next) {
      const json = JSON.stringify(r.body.messages);
      expect(json).toContain('echo one > a.txt');
      expect(json).not.toContain('sleep 30');
    }
  }, 90_000);

  it('retry policy workspace "rollback": the failed attempt’s files and conversation are undone before the prompt is sent again', async () => {
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Do the failing thing',
      options: { provider: 'fake', model: FAILING },
      retryPolicy: { workspace: 'rollback', initialDelayMs: 100, jitter: 'none', retryOn: ['bad_request'] },
    });
    const session = await turnEnded(h.runtime, sessionId, 1);
    expect(session.state).toBe('completed');
    expect(session.context?.turn?.attempts.map((a) => [a.outcome, a.category, a.promptRecorded])).toEqual([
      ['failed', 'bad_request', false],
      ['completed', null, true],
    ]);
    const path = join(config.root, sessionId);
    expect(existsSync(join(path, 'kept.txt'))).toBe(false);
    expect(readFileSync(join(path, 'again.txt'), 'utf8')).toBe('again\n');
    // The retry's first request: the prompt once, nothing of the failed attempt's tool call.
    const retried = suite.server.requestsFor(FAILING)[2];
    const json = JSON.stringify(retried?.body.messages ?? []);
    expect(json.split('Do the failing thing').length - 1).toBe(1);
    expect(json).not.toContain('kept.txt');
  }, 90_000);

  it('a completed end whose files nothing changed since the last tool batch (or the start) records that snapshot again', async () => {
    const { sessionId } = await h.runtime.enqueue({ prompt: 'RUN: echo one > a.txt', options: options() });
    expect((await turnEnded(h.runtime, sessionId, 1)).state).toBe('completed');
    await h.runtime.enqueue({ sessionId, prompt: 'RUN: echo two >> a.txt' });
    expect((await turnEnded(h.runtime, sessionId, 2)).state).toBe('completed');
    // One snapshot per one-tool turn (and the session's start): no end snapshots.
    const labels = snapshotLabels(sessionId);
    expect(labels).toEqual([
      'turn 1 attempt 1 start',
      expect.stringMatching(/^turn 1 tool call_/),
      expect.stringMatching(/^turn 2 tool call_/),
    ]);
    const pointer = await pointerOf(sessionId);
    expect(pointer?.label).toMatch(/^turn 2 tool call_/);
    expect(storeFiles(pointer?.snapshot ?? '')).toEqual(['a.txt']);
    // The copy is marked at it (the next turn on this host restores nothing), and holds exactly it.
    expect(readFileSync(join(config.gitDir, 'sessions', sessionId, 'at'), 'utf8')).toBe(pointer?.snapshot);
    expect(readFileSync(join(config.root, sessionId, 'a.txt'), 'utf8')).toBe('one\ntwo\n');
    // The turn's point (undo, fork, diff) names it too.
    const points = async () =>
      JSON.parse(
        (await h.connect('t').hget(internals(h.runtime).keys.session(sessionId, 'agent'), 'workspace-turns')) ?? '[]',
      ) as Array<{ turn: number; snapshot: string }>;
    expect((await points()).at(-1)).toMatchObject({ turn: 2, snapshot: pointer?.snapshot });
    // A turn with no tool call records none: it ends on the snapshot it started on.
    await h.runtime.enqueue({ sessionId, prompt: 'Just say something' });
    expect((await turnEnded(h.runtime, sessionId, 3)).state).toBe('completed');
    expect(snapshotLabels(sessionId)).toHaveLength(3);
    expect((await points()).at(-1)).toMatchObject({ turn: 3, snapshot: pointer?.snapshot });
    expect((await pointerOf(sessionId))?.snapshot).toBe(pointer?.snapshot);
    expect(readFileSync(join(config.gitDir, 'sessions', sessionId, 'at'), 'utf8')).toBe(pointer?.snapshot);
  }, 60_000);

  it('a file changed after the last tool batch by what a tool left running is recorded at the completed end', async () => {
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Leave something running',
      options: { provider: 'fake', model: LEFT_RUNNING },
    });
    expect((await turnEnded(h.runtime, sessionId, 1)).state).toBe('completed');
    const pointer = await pointerOf(sessionId);
    expect(pointer?.label).toBe('turn 1 attempt 1 end');
    expect(storeFiles(pointer?.snapshot ?? '').sort()).toEqual(['early.txt', 'late.txt']);
    expect(snapshotLabels(sessionId)).toEqual([
      'turn 1 attempt 1 start',
      'turn 1 tool call_left_1',
      'turn 1 attempt 1 end',
    ]);
  }, 60_000);

  it('an excluded file (.env*, id_*) is in no snapshot; the others are', async () => {
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'RUN: echo secret > .env.local; echo key > id_rsa; echo ok > ok.txt',
      options: options(),
    });
    expect((await turnEnded(h.runtime, sessionId, 1)).state).toBe('completed');
    const pointer = await pointerOf(sessionId);
    const files = storeFiles(pointer?.snapshot ?? '');
    expect(files).toContain('ok.txt');
    expect(files).not.toContain('.env.local');
    expect(files).not.toContain('id_rsa');
    // The file is still there for the agent on this host.
    expect(readFileSync(join(config.root, sessionId, '.env.local'), 'utf8')).toBe('secret\n');
  }, 60_000);

  it('a snapshot over maxBytes fails the turn with category quota; the workspace is back at its last recorded snapshot', async () => {
    const { sessionId } = await h.runtime.enqueue({ prompt: 'RUN: echo small > small.txt', options: options() });
    expect((await turnEnded(h.runtime, sessionId, 1)).state).toBe('completed');
    await h.runtime.enqueue({ sessionId, prompt: 'RUN: head -c 200000 /dev/zero > big.bin' });
    const session = await turnEnded(h.runtime, sessionId, 2);
    expect(session.state).toBe('failed');
    expect(session.context?.turn?.attempts.at(-1)?.category).toBe('quota');
    const messages = await h.runtime.readMessages(sessionId);
    const last = messages.at(-1);
    expect(last?.type).toBe('terminal.failed');
    expect(JSON.stringify(last?.content)).toContain('maxBytes');
    const path = join(config.root, sessionId);
    expect(existsSync(join(path, 'big.bin'))).toBe(false);
    expect(readFileSync(join(path, 'small.txt'), 'utf8')).toBe('small\n');
  }, 60_000);

  it('deleting a session removes its snapshots from the store and its copy on this host', async () => {
    const { sessionId } = await h.runtime.enqueue({ prompt: 'RUN: echo bye > bye.txt', options: options() });
    expect((await turnEnded(h.runtime, sessionId, 1)).state).toBe('completed');
    expect(storeHas(sessionId)).toBe(true);
    expect(existsSync(join(config.root, sessionId))).toBe(true);
    await until(async () => (await h.runtime.getSession(sessionId))?.heldBy === null, 10_000, 'the lease released');
    expect((await h.runtime.deleteSession(sessionId)).deleted).toBe(true);
    // remove() takes the store's list, the copy, then sessiond's git data: all three gone once it is done.
    await until(
      async () =>
        !storeHas(sessionId) &&
        !existsSync(join(config.root, sessionId)) &&
        !existsSync(join(config.gitDir, 'sessions', sessionId)),
      20_000,
      'the workspace sweep',
    );
  }, 60_000);
});
