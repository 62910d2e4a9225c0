import type { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { hasErrorCode, InputError, NotFoundError, QuotaError } from '../../src/errors.ts';
import { counterTotals } from '../../src/runtime/counters.ts';
import { createKeys } from '../../src/runtime/keys.ts';
import { Runtime, type SessionRecord } from '../../src/runtime/runtime.ts';
import { scheduleQueue } from '../../src/runtime/schedules/store.ts';
import type { ScheduleView } from '../../src/runtime/schedules/spec.ts';
import type { SessionWorker } from '../../src/runtime/worker.ts';
import type { PiEnv } from '../support/pi-env.ts';
import { runCli } from '../support/cli.ts';
import {
  agentRecords,
  BACKENDS,
  TEST_POLICY,
  until,
  useRuntimeSuite,
  type Harness,
  type RuntimeSuite,
} from '../support/runtime.ts';

/**
 * Schedules through real workers: real redis-server (and a real 3-master cluster), real BullMQ job schedulers, real
 * pi against the fake model. Once per tick is asserted by ids: each turn a schedule started names its tick (the
 * prompt's id), and no tick appears twice; the count of turns is bounded by the ticks elapsed. No timing assertion.
 */

const EVERY_MS = 3000;
const SETTLED = new Set(['completed', 'failed', 'cancelled']);

let env: PiEnv;
let h: Harness;
let runtime: Runtime;
let raw: Redis;
let cliEnv: RuntimeSuite['cliEnv'];

/** The ticks of the turns schedule `id` started in the session, in turn order. */
function scheduledTicks(session: SessionRecord | null, id: string): number[] {
  return (session?.history ?? []).flatMap((t) => (t.prompt?.schedule?.id === id ? [t.prompt.schedule.tick] : []));
}

async function waitFirings(id: string, atLeast: number, what: string): Promise<ScheduleView> {
  return until(
    async () => {
      const view = await runtime.getSchedule(id);
      const n = Object.values(view.firings).reduce((a, b) => a + b, 0);
      return n >= atLeast ? view : null;
    },
    120_000,
    what,
  );
}

/** The session once nothing of it runs or waits (every prompt a firing stored has had its turn). */
function settled(sessionId: string): Promise<SessionRecord> {
  return until(
    async () => {
      const s = await runtime.getSession(sessionId);
      return s !== null && SETTLED.has(s.state) && s.queued.length === 0 && s.context?.mailbox.length === 0 ? s : null;
    },
    180_000,
    `${sessionId} to settle`,
  );
}

/**
 * Every key of the schedules' slot with its value, but for BullMQ's own bookkeeping of its running workers (its
 * stalled check, events, job counter): equal before and after means no schedule was written.
 */
async function scheduleKeysDump(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const tag = `{${h.prefix}:sch}`;
  const keys = (await raw.keys(`${tag}*`)).filter(
    (k) => !k.startsWith(`${tag}:schedules:`) || k.startsWith(`${tag}:schedules:repeat`),
  );
  for (const key of keys) out[key] = (await raw.dumpBuffer(key))?.toString('base64') ?? '(gone)';
  return out;
}

describe.each(BACKENDS)('schedules, on %s Redis', { timeout: 300_000 }, (backend) => {
  let workers: SessionWorker[] = [];
  useRuntimeSuite(`schedules-${backend}`, { backend }, async (s) => {
    ({ env, h, cliEnv } = s);
    runtime = new Runtime({
      connect: h.connect,
      prefix: h.prefix,
      policy: TEST_POLICY,
      schedules: { minIntervalMs: 1000, maxPerCaller: 4 },
    });
    raw = h.connect('schedules-test');
    workers = await Promise.all([h.startWorker(), h.startWorker(), h.startWorker()]);
  });
  afterAll(async () => {
    await runtime.close();
  });

  it('--every 3s on three workers fires once per tick (by tick ids); remove stops it', async () => {
    const { sessionId } = await runtime.enqueue({
      prompt: 'Say hello',
      options: { provider: 'fake', model: 'text', cwd: env.cwd },
    });
    const added = await runtime.addSchedule({ id: 'tick', every: '3s', sessionId, prompt: 'Say hello again' });
    expect(added).toMatchObject({ id: 'tick', everyMs: EVERY_MS, sessionId, status: 'active', whenBusy: 'enqueue' });
    expect(added.nextRunAt).not.toBeNull();
    await waitFirings('tick', 5, 'five firings');
    await runtime.pauseSchedule('tick');
    const pausedAt = Date.now();
    // A firing taken just before the pause lands in the runs and the session alike.
    await new Promise((r) => setTimeout(r, 1000));
    const session = await settled(sessionId);
    const runs = await runtime.scheduleRuns('tick');
    const view = await runtime.getSchedule('tick');
    const ticks = runs.map((r) => r.tick);
    // Each firing names its tick (BullMQ's job id); none twice, however many workers took firings.
    expect(new Set(ticks).size).toBe(ticks.length);
    expect(runs.every((r) => r.outcome === 'enqueued' && r.sessionId === sessionId)).toBe(true);
    expect(view.firings).toEqual({ enqueued: runs.length });
    // One turn per firing: the first turn was the caller's own, each other one a firing's prompt.
    expect(session.context?.turnIndex).toBe(runs.length + 1);
    expect(runs.map((r) => r.turn).sort((x, y) => (x ?? 0) - (y ?? 0))).toEqual(
      Array.from({ length: runs.length }, (_, i) => i + 2),
    );
    // The ticks are the schedule's, 3 s apart; no more firings than ticks elapsed (a tick skipped on a loaded host is allowed).
    const first = Math.min(...ticks);
    for (const tick of ticks) expect((tick - first) % EVERY_MS).toBe(0);
    expect(runs.length).toBeLessThanOrEqual(Math.floor((pausedAt - first) / EVERY_MS) + 1);
    // The latest turn says which schedule and tick it came from.
    const latest = runs.find((r) => r.turn === runs.length + 1);
    expect((await runtime.reads.inspect(sessionId)).turn?.schedule).toEqual({ id: 'tick', tick: latest?.tick });

    // Resumed, then removed: no scheduler left, and no turn for a tick after the removal.
    await runtime.resumeSchedule('tick');
    await waitFirings('tick', runs.length + 1, 'a firing after resume');
    await runtime.removeSchedule('tick');
    await expect(runtime.getSchedule('tick')).rejects.toBeInstanceOf(NotFoundError);
    const queue = scheduleQueue(h.connect('schedules-queue'), createKeys(h.prefix));
    expect((await queue.getJobSchedulers()).map((s) => s.key)).not.toContain('tick');
    await queue.close();
    const removed = (await settled(sessionId)).context?.turnIndex ?? 0;
    await new Promise((r) => setTimeout(r, 2 * EVERY_MS + 500));
    // One firing in flight at the removal may still land.
    expect((await settled(sessionId)).context?.turnIndex ?? 0).toBeLessThanOrEqual(removed + 1);
  });

  it('survives every worker restarting: the firings go on with new workers', async () => {
    const { sessionId } = await runtime.enqueue({
      prompt: 'Say hello',
      options: { provider: 'fake', model: 'text', cwd: env.cwd },
    });
    await runtime.addSchedule({ id: 'durable', every: '3s', sessionId, prompt: 'Again' });
    await waitFirings('durable', 2, 'two firings before the restart');
    await Promise.all(workers.map((w) => w.close(2000)));
    const before = Object.values((await runtime.getSchedule('durable')).firings).reduce((a, b) => a + b, 0);
    const stoppedAt = Date.now();
    workers = await Promise.all([h.startWorker(), h.startWorker(), h.startWorker()]);
    const view = await waitFirings('durable', before + 2, 'two firings after the restart');
    expect(view.lastRun?.tick).toBeGreaterThan(stoppedAt - EVERY_MS);
    await runtime.pauseSchedule('durable');
    await new Promise((r) => setTimeout(r, 1000));
    const session = await settled(sessionId);
    const runs = await runtime.scheduleRuns('durable');
    expect(new Set(runs.map((r) => r.tick)).size).toBe(runs.length);
    expect(session.context?.turnIndex).toBe(runs.length + 1);
    await runtime.removeSchedule('durable');
  });

  if (backend === 'single') {
    it('pause stops the firings, resume starts them again', async () => {
      const { sessionId } = await runtime.enqueue({
        prompt: 'Say hello',
        options: { provider: 'fake', model: 'text', cwd: env.cwd },
      });
      await runtime.addSchedule({ id: 'pausing', every: '3s', sessionId, prompt: 'Again' });
      await waitFirings('pausing', 1, 'a firing');
      const paused = await runtime.pauseSchedule('pausing');
      expect(paused).toMatchObject({ status: 'paused', nextRunAt: null });
      const pausedAt = Date.now();
      // Two ticks go by; a firing taken just before the pause may still record.
      await new Promise((r) => setTimeout(r, 2 * EVERY_MS + 500));
      const during = await runtime.getSchedule('pausing');
      expect(during.lastRun?.tick ?? 0).toBeLessThanOrEqual(pausedAt);
      const resumed = await runtime.resumeSchedule('pausing');
      expect(resumed.status).toBe('active');
      expect(resumed.nextRunAt).toBeGreaterThan(pausedAt);
      const n = Object.values(during.firings).reduce((a, b) => a + b, 0);
      const view = await waitFirings('pausing', n + 1, 'a firing after resume');
      expect(view.lastRun?.tick).toBeGreaterThan(pausedAt + 2 * EVERY_MS);
      await runtime.removeSchedule('pausing');
      await settled(sessionId);
    });

    it('whenBusy reject while a long turn runs: the firing is rejected, nothing stored in the session', async () => {
      const { sessionId } = await runtime.enqueue({
        prompt: 'Sleep a long time',
        options: { provider: 'fake', model: 'long-tool-grandchild', cwd: env.cwd },
      });
      await until(async () => (await agentRecords(sessionId))[0]?.pid != null, 60_000, 'the long turn to run');
      await runtime.addSchedule({ id: 'busy', every: '3s', sessionId, prompt: 'Now', whenBusy: 'reject' });
      const view = await waitFirings('busy', 2, 'two firings');
      expect(view.firings.rejected_busy).toBeGreaterThanOrEqual(2);
      expect(view.firings.enqueued).toBeUndefined();
      expect(view.lastRun).toMatchObject({ outcome: 'rejected_busy', sessionId });
      expect(view.lastRun?.error).toContain('busy');
      // The fleet counter behind sessiond_schedule_firings_total{outcome}.
      const totals = await counterTotals(raw, createKeys(h.prefix));
      expect(totals.get('schedule|rejected_busy')).toBeGreaterThanOrEqual(2);
      expect(totals.get('schedule|enqueued')).toBeGreaterThanOrEqual(5);
      const session = await runtime.getSession(sessionId);
      expect(session?.state).toBe('running');
      expect(session?.queued).toEqual([]);
      await runtime.removeSchedule('busy');
      await runtime.cancel(sessionId, 'test over');
      await settled(sessionId);
    });

    it('a schedule whose session was deleted ends, saying so, and fires no more', async () => {
      const { sessionId } = await runtime.enqueue({
        prompt: 'Say hello',
        options: { provider: 'fake', model: 'text', cwd: env.cwd },
      });
      await runtime.addSchedule({ id: 'orphan', every: '3s', sessionId, prompt: 'Again' });
      await waitFirings('orphan', 1, 'a firing');
      await runtime.deleteSession(sessionId, { force: true });
      const ended = await until(
        async () => {
          const v = await runtime.getSchedule('orphan');
          return v.status === 'ended' ? v : null;
        },
        60_000,
        'the schedule to end',
      );
      expect(ended).toMatchObject({ endedReason: 'session_deleted', nextRunAt: null });
      expect(ended.lastRun).toMatchObject({ outcome: 'session_deleted', sessionId });
      expect(await runtime.getSession(sessionId)).toBeNull();
      await expect(runtime.resumeSchedule('orphan')).rejects.toThrow(/has ended/);
      await runtime.removeSchedule('orphan');
    });

    it('--new: each firing a new session named <schedule>.<tick>', async () => {
      await runtime.addSchedule({
        id: 'fresh',
        every: '3s',
        new: true,
        prompt: 'Say hello',
        options: { provider: 'fake', model: 'text', cwd: env.cwd },
      });
      const view = await waitFirings('fresh', 2, 'two firings');
      const fired = await runtime.scheduleRuns('fresh');
      await runtime.removeSchedule('fresh');
      for (const run of fired) {
        expect(run).toMatchObject({ outcome: 'enqueued', turn: 1, sessionId: `fresh.${run.tick}` });
        await settled(run.sessionId ?? '');
      }
      const made = view.lastRun?.sessionId ?? '';
      expect(made).toBe(`fresh.${view.lastRun?.tick}`);
      const session = await settled(made);
      expect(session.context?.turnIndex).toBe(1);
      expect(scheduledTicks(session, 'fresh')).toEqual([view.lastRun?.tick]);
      expect(fired.length).toBeGreaterThanOrEqual(2);
    });

    it('the CLI: add, list, pause, resume, remove; a bad field exits 2 naming it, an unknown id 3', async () => {
      const { sessionId } = await runtime.enqueue({
        prompt: 'Say hello',
        options: { provider: 'fake', model: 'text', cwd: env.cwd },
      });
      const cli = (args: string[]) => runCli(['schedule', ...args], { env: cliEnv() });
      const bad = await cli(['add', '--every', 'soon', '--session', sessionId, 'Again']);
      expect(bad.exitCode).toBe(2);
      expect(bad.stderr).toContain('every: invalid duration "soon"');
      const often = await cli(['add', '--every', '10s', '--session', sessionId, 'Again']);
      expect(often.exitCode).toBe(2);
      expect(often.stderr).toContain("every: must be at least 60000 ms (the deployment's schedules.minInterval)");
      const added = await cli([
        'add',
        '--cron',
        '0 9 * * 1-5',
        '--tz',
        'Europe/Paris',
        '--session',
        sessionId,
        '--id',
        'cli',
        '--json',
        'Again',
      ]);
      expect(added.exitCode).toBe(0);
      expect(JSON.parse(added.stdout)).toMatchObject({
        id: 'cli',
        cron: '0 9 * * 1-5',
        tz: 'Europe/Paris',
        sessionId,
        status: 'active',
      });
      const listed = await cli(['list']);
      expect(listed.stdout).toContain(`cli  cron "0 9 * * 1-5" Europe/Paris  session ${sessionId}  active  next 20`);
      expect((await cli(['pause', 'cli'])).stdout).toContain('paused  next -');
      expect((await cli(['resume', 'cli'])).stdout).toContain('active  next 20');
      expect((await cli(['remove', 'cli'])).stdout).toBe('removed schedule cli\n');
      const unknown = await cli(['remove', 'cli']);
      expect(unknown.exitCode).toBe(3);
      expect(unknown.stderr).toContain('unknown schedule "cli"');
      await settled(sessionId);
    });

    it('bad inputs and limits: an error naming the field, nothing written', async () => {
      const { sessionId } = await runtime.enqueue({
        prompt: 'Say hello',
        options: { provider: 'fake', model: 'text', cwd: env.cwd },
      });
      await settled(sessionId);
      const before = await scheduleKeysDump();
      const field = async (input: Record<string, unknown>): Promise<string[]> => {
        const error = await runtime.addSchedule(input).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(InputError);
        return (error as InputError).issues.map((i) => i.field);
      };
      expect(await field({ cron: 'every tuesday', sessionId, prompt: 'x' })).toEqual(['cron']);
      expect(await field({ cron: '0 9 * * *', tz: 'Mars/Olympus', sessionId, prompt: 'x' })).toEqual(['tz']);
      expect(await field({ every: 'soon', sessionId, prompt: 'x' })).toEqual(['every']);
      expect(await field({ every: '500ms', sessionId, prompt: 'x' })).toEqual(['every']);
      expect(await field({ every: '3s', sessionId, prompt: '  ' })).toEqual(['prompt']);
      expect(await field({ every: '3s', prompt: 'x' })).toEqual(['sessionId']);
      expect(await field({ every: '3s', cron: '0 9 * * *', sessionId, prompt: 'x' })).toEqual(['every']);
      expect(await field({ every: '3s', sessionId, prompt: 'x', whenBusy: 'sometimes' })).toEqual(['whenBusy']);
      expect(await field({ every: '3s', new: true, prompt: 'x', options: { agent: 'nope' } })).toContain(
        'options.agent',
      );
      // Every second is below a deployment minimum of a minute.
      const strict = new Runtime({ connect: h.connect, prefix: h.prefix, policy: TEST_POLICY });
      const often = await strict.addSchedule({ cron: '* * * * * *', sessionId, prompt: 'x' }).catch((e: unknown) => e);
      await strict.close();
      expect(often).toBeInstanceOf(InputError);
      expect((often as InputError).issues).toEqual([
        { field: 'cron', message: expect.stringContaining('must be at least 60000 ms') },
      ]);
      const unknown = await runtime
        .addSchedule({ every: '3s', sessionId: 'no-such-session', prompt: 'x' })
        .catch((e: unknown) => e);
      expect(hasErrorCode(unknown, 'not_found')).toBe(true);
      expect(await scheduleKeysDump()).toEqual(before);

      // maxPerCaller 4: a fifth of one caller is refused, another caller's is not.
      for (let i = 0; i < 4; i += 1)
        await runtime.addSchedule(
          { id: `lim${i}`, cron: '0 9 * * *', tz: 'Europe/Paris', sessionId, prompt: 'x' },
          { caller: 'alice' },
        );
      const over = await runtime
        .addSchedule({ id: 'lim4', cron: '0 9 * * *', sessionId, prompt: 'x' }, { caller: 'alice' })
        .catch((e: unknown) => e);
      expect(over).toBeInstanceOf(QuotaError);
      expect(over).toMatchObject({ limit: 'maxSchedulesPerCaller', max: 4 });
      await expect(runtime.getSchedule('lim4')).rejects.toBeInstanceOf(NotFoundError);
      const bob = await runtime.addSchedule(
        { id: 'lim4', cron: '0 9 * * *', sessionId, prompt: 'x' },
        { caller: 'bob' },
      );
      expect(bob).toMatchObject({ owner: 'bob', cron: '0 9 * * *', status: 'active' });
      const paris = await runtime.getSchedule('lim0');
      // 09:00 in Paris is 07:00 or 08:00 UTC.
      expect([7, 8]).toContain(new Date(paris.nextRunAt ?? 0).getUTCHours());
      for (let i = 0; i < 5; i += 1) await runtime.removeSchedule(`lim${i}`);
      expect(await runtime.listSchedules()).toEqual([]);
    });
  }
});
