import { hostname, userInfo } from 'node:os';
import { describe, expect, it } from 'vitest';
import { findProcessesByMarker } from '../../../src/process/index.ts';
import { ConflictError } from '../../../src/runtime/lifecycle/errors.ts';
import { removeSession } from '../../../src/runtime/lifecycle/remove.ts';
import { sweep } from '../../../src/runtime/lifecycle/sweeper.ts';
import { NotFoundError } from '../../../src/runtime/runtime.ts';
import type { SessionWorker } from '../../../src/runtime/worker.ts';
import { runCli } from '../../support/cli.ts';
import { leftovers, scanSessionKeys } from '../../support/lifecycle.ts';
import type { PiEnv } from '../../support/pi-env.ts';
import {
  agentRecords,
  turnEnded,
  until,
  useRuntimeSuite,
  type Harness,
  type RuntimeSuite,
} from '../../support/runtime.ts';
import { internals } from '../../../src/runtime/internals.ts';

/**
 * Deletion: a session is removed fleet-wide (every key, checked by scanning; its index entries; its
 * activation job), a running turn is cancelled first with its process tree gone, deleting twice is
 * not an error, and a delete racing prompts ends with the prompts refused or the session whole.
 */

let env: PiEnv;
let h: Harness;
let cliEnv: RuntimeSuite['cliEnv'];
let worker: SessionWorker | null = null;

useRuntimeSuite('delete', {}, (s) => {
  ({ env, h, cliEnv } = s);
});

const opts = (model: string) => ({ provider: 'fake', model, cwd: env.cwd });

async function finishedSession(): Promise<string> {
  worker ??= await h.startWorker();
  const { sessionId } = await h.runtime.enqueue({ prompt: 'Say something', options: opts('text') });
  expect((await turnEnded(h.runtime, sessionId)).state).toBe('completed');
  // The worker's index update (it finished) lands within a tick of its release.
  await until(
    async () => (await internals(h.runtime).redis.hget(`{${h.prefix}}:states`, sessionId)) === 'completed',
    5000,
    'the state index',
  );
  return sessionId;
}

function cli(args: string[]) {
  return runCli(args, { env: cliEnv() });
}

describe('delete a session', { timeout: 120_000 }, () => {
  it('a finished session: every key of it, its message log and index entries are gone; a second delete is not an error', async () => {
    const sessionId = await finishedSession();
    expect(await scanSessionKeys(internals(h.runtime).redis, internals(h.runtime).keys, sessionId)).toEqual(
      expect.arrayContaining([
        expect.stringContaining(':log'),
        expect.stringContaining(':meta'),
        expect.stringContaining(':agent'),
      ]),
    );
    expect(await h.runtime.deleteSession(sessionId)).toEqual({ sessionId, deleted: true, cancelled: false });
    expect(await leftovers(internals(h.runtime).redis, internals(h.runtime).keys, sessionId)).toEqual([]);
    expect(await h.runtime.getSession(sessionId)).toBeNull();
    expect((await h.runtime.listSessions()).map((s) => s.sessionId)).not.toContain(sessionId);

    // Twice: not an error, and says so.
    expect(await h.runtime.deleteSession(sessionId)).toEqual({ sessionId, deleted: false, cancelled: false });
    const again = await cli(['delete', sessionId, '--json']);
    expect(again.exitCode).toBe(0);
    expect(JSON.parse(again.stdout)).toEqual({ sessionId, deleted: false, cancelled: false });
  });

  it('an unknown id: NotFoundError, and exit 3 from `sessiond delete`', async () => {
    await expect(h.runtime.deleteSession('never-was-here')).rejects.toBeInstanceOf(NotFoundError);
    const result = await cli(['delete', 'never-was-here']);
    expect(result.exitCode).toBe(3);
    expect(result.stderr).toContain('unknown session "never-was-here"');
  });

  it('from the CLI: a finished session is deleted (exit 0) and nothing of it is left', async () => {
    const sessionId = await finishedSession();
    const result = await cli(['delete', sessionId]);
    expect(result).toMatchObject({ exitCode: 0, stdout: `deleted ${sessionId}\n` });
    expect(await leftovers(internals(h.runtime).redis, internals(h.runtime).keys, sessionId)).toEqual([]);
    // The deletion is audited: who (this shell's user and host), which session, the outcome.
    const audit = await cli(['deletions', '--limit', '1', '--json']);
    expect(audit.exitCode).toBe(0);
    expect(JSON.parse(audit.stdout)).toEqual([
      {
        at: expect.any(Number),
        sessionId,
        actor: `cli:${userInfo().username}@${hostname()}`,
        force: false,
        outcome: 'deleted',
        cancelled: false,
      },
    ]);
    expect((await cli(['deletions', '--limit', 'lots'])).stderr).toContain('--limit: must be an integer');
  });

  it('running a real pi turn with a long tool: refused without force; with --force the turn is cancelled first, no process is left, nothing in Redis', async () => {
    worker ??= await h.startWorker();
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Sleep a long time',
      options: opts('long-tool-grandchild'),
    });
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
    await until(
      async () => (await findProcessesByMarker(record.marker)).length >= 4,
      10_000,
      'the tool’s process tree',
    );

    // Without force, an active session is not deleted, and nothing of it changes.
    await expect(h.runtime.deleteSession(sessionId)).rejects.toBeInstanceOf(ConflictError);
    const refused = await cli(['delete', sessionId]);
    expect(refused.exitCode).toBe(1);
    expect(refused.stderr).toContain('is active');
    expect((await h.runtime.getSession(sessionId))?.state).toBe('running');
    expect(await findProcessesByMarker(record.marker)).not.toEqual([]);

    const result = await cli(['delete', sessionId, '--force', '--json']);
    expect(result.stderr).toBe('');
    expect(JSON.parse(result.stdout)).toEqual({ sessionId, deleted: true, cancelled: true });
    expect(await findProcessesByMarker(record.marker)).toEqual([]);
    expect(await agentRecords(sessionId)).toEqual([]);
    expect(await leftovers(internals(h.runtime).redis, internals(h.runtime).keys, sessionId)).toEqual([]);
    // The worker let go of it and took nothing back: no activation comes back to life.
    await new Promise((r) => setTimeout(r, 1500));
    expect(worker.activeSessions).not.toContain(sessionId);
    expect(await leftovers(internals(h.runtime).redis, internals(h.runtime).keys, sessionId)).toEqual([]);
  });

  it('a queued session nobody runs yet: force removes it with its activation job', async () => {
    // A prefix with no worker: the job waits in the queue.
    const { sessionId } = await h.runtime.enqueue({ prompt: 'Wait', options: opts('text') });
    const jobId = await internals(h.runtime).store.activeJobId(sessionId);
    if (worker === null) expect(await internals(h.runtime).queue.queue.getJob(jobId ?? '')).toBeDefined();
    await expect(h.runtime.deleteSession(sessionId)).rejects.toThrow(/is active/);
    expect(await h.runtime.deleteSession(sessionId, { force: true })).toMatchObject({ deleted: true });
    expect(await internals(h.runtime).queue.queue.getJob(jobId ?? '')).toBeUndefined();
    expect(await leftovers(internals(h.runtime).redis, internals(h.runtime).keys, sessionId)).toEqual([]);
  });

  it(
    'racing 50 concurrent prompts: either every prompt is refused and nothing is left, or the delete is refused and every accepted prompt is kept',
    { timeout: 240_000 },
    async () => {
      const outcomes: string[] = [];
      // Rounds: prompts all at once with the delete; then spread over 60 ms after it (the delete's steps interleave with them).
      for (const [first, spread] of [
        [0, 0],
        [1, 60],
        [0, 20],
      ] as const) {
        const sessionId = await finishedSession();
        await worker?.close(2000);
        worker = null;
        const prompts = Array.from({ length: 50 }, (_, i) =>
          new Promise((r) => setTimeout(r, first + (i * spread) / 50)).then(() =>
            h.runtime.enqueue({ sessionId, prompt: `racing ${i}` }, { mustExist: true }).then(
              () => 'accepted' as const,
              (error: Error) => error.name,
            ),
          ),
        );
        const deletion = Promise.resolve().then(() =>
          h.runtime.deleteSession(sessionId).then(
            () => 'deleted' as const,
            (error: Error) => error.name,
          ),
        );
        const [deleted, ...results] = await Promise.all([deletion, ...prompts]);
        const accepted = results.filter((r) => r === 'accepted').length;
        if (deleted === 'deleted') {
          expect(accepted).toBe(0);
          expect(new Set(results)).toEqual(
            new Set(results.filter((r) => r === 'ConflictError' || r === 'NotFoundError')),
          );
          expect(await leftovers(internals(h.runtime).redis, internals(h.runtime).keys, sessionId)).toEqual([]);
        } else {
          expect(deleted).toBe('ConflictError');
          expect(accepted).toBeGreaterThan(0);
          // Whole: its record, snapshot and log as they were, every accepted prompt waiting in order, none refused after one was taken by mistake.
          const view = await h.runtime.getSession(sessionId);
          expect(view).toMatchObject({ state: 'completed', cancelRequested: false });
          expect(view?.queued.map((p) => p.text)).toHaveLength(accepted);
          expect((await h.runtime.readMessages(sessionId)).length).toBe(view?.lastSeq);
          expect(await h.runtime.deleteSession(sessionId, { force: true })).toMatchObject({ deleted: true });
          expect(await leftovers(internals(h.runtime).redis, internals(h.runtime).keys, sessionId)).toEqual([]);
        }
        outcomes.push(`${String(deleted)}:${accepted}`);
      }
      expect(outcomes).toHaveLength(3);
    },
  );

  it('a deletion cut short (after its mark, after its keys went) is finished by the next sweep: nothing half-deleted is left', async () => {
    const deps = {
      redis: internals(h.runtime).redis,
      keys: internals(h.runtime).keys,
      queue: internals(h.runtime).queue,
      publish: () => Promise.resolve(),
    };
    const marked = await finishedSession();
    const purged = await finishedSession();
    expect(await removeSession(deps, marked, { mode: 'finished', stopAfter: 'mark' })).toMatchObject({
      outcome: 'stopped',
    });
    expect(await removeSession(deps, purged, { mode: 'finished', stopAfter: 'purge' })).toMatchObject({
      outcome: 'stopped',
    });
    // Marked: no prompt is taken any more, the session stays whole until the sweep.
    await expect(h.runtime.enqueue({ sessionId: marked, prompt: 'too late' })).rejects.toThrow(/being deleted/);
    expect(await scanSessionKeys(internals(h.runtime).redis, internals(h.runtime).keys, marked)).not.toEqual([]);
    expect(await leftovers(internals(h.runtime).redis, internals(h.runtime).keys, purged)).not.toEqual([]);

    const result = await sweep(deps, { retentionMs: 0, resumeAfterMs: 0 });
    expect(result).toMatchObject({ ran: true, resumed: 2 });
    expect(await leftovers(internals(h.runtime).redis, internals(h.runtime).keys, marked)).toEqual([]);
    expect(await leftovers(internals(h.runtime).redis, internals(h.runtime).keys, purged)).toEqual([]);
  });
});
