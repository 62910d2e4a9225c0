import { randomBytes } from 'node:crypto';
import type { Queue } from 'bullmq';
import { ConflictError, NotFoundError, QuotaError } from '../../errors.ts';
import { checkEnqueue } from '../caller/enqueue.ts';
import type { CallerParts } from '../caller/parts.ts';
import type { SessionOwner } from '../limits/owner-sessions.ts';
import {
  SCHEDULE_DEFAULTS,
  parseScheduleRequest,
  type ScheduleDefinition,
  type ScheduleLimits,
  type ScheduleView,
} from './spec.ts';
import { ScheduleStore, scheduleQueue, viewOf } from './store.ts';

// The caller's side of schedules: add, list, remove, pause, resume. The firings are the workers' (fire.ts).

/** What the schedule operations work with: the caller's parts, the schedules' store (its queue made on first use), the bounds. */
export interface ScheduleParts {
  parts: CallerParts;
  store: ScheduleStore;
  limits: ScheduleLimits;
  close(): Promise<void>;
}

export function scheduleParts(parts: CallerParts, limits: Partial<ScheduleLimits> = {}): ScheduleParts {
  let queue: Queue | null = null;
  const store = new ScheduleStore(
    parts.redis,
    parts.keys,
    () => (queue ??= scheduleQueue(parts.connect('runtime-schedules'), parts.keys)),
  );
  return {
    parts,
    store,
    limits: { ...SCHEDULE_DEFAULTS, ...limits },
    async close() {
      const made = queue;
      if (made === null) return;
      const connection = await made.client;
      await made.close();
      // BullMQ leaves a connection it was given open: this one is the schedules' own.
      await connection.quit().catch(() => connection.disconnect());
    },
  };
}

/** Who adds a schedule: `caller` counts against schedules.maxPerCaller (default `local`); `owner`, a token's session cap each new session holds. */
export interface ScheduleHow {
  caller?: string;
  owner?: SessionOwner;
}

/**
 * Adds a schedule. Refused with nothing written: InputError naming the field (a bad timing, zone, duration, prompt,
 * or any field its enqueue would refuse), NotFoundError (an unknown session), ConflictError (the id is taken),
 * QuotaError (`maxSchedules`, `maxSchedulesPerCaller`).
 */
export async function addSchedule(sp: ScheduleParts, input: unknown, how: ScheduleHow = {}): Promise<ScheduleView> {
  const { parts, store, limits } = sp;
  const { id: asked, timing, sessionId, request } = parseScheduleRequest(input, limits);
  // Each firing is an enqueue: checked as one now (the deployment policy, whenBusy, options), and again when it fires.
  await checkEnqueue(parts, { ...request, ...(sessionId === null ? {} : { sessionId }) });
  if (sessionId !== null && (await parts.redis.exists(parts.keys.session(sessionId, 'meta'))) === 0)
    throw new NotFoundError(`unknown session "${sessionId}"`);
  const def: ScheduleDefinition = {
    id: asked ?? `sch-${randomBytes(4).toString('hex')}`,
    timing,
    sessionId,
    request,
    owner: how.caller ?? how.owner?.name ?? 'local',
    ...(how.owner === undefined || sessionId !== null ? {} : { ownerCap: how.owner }),
    createdAt: Date.now(),
  };
  const refused = await store.add(def, limits);
  if (refused !== null) {
    if (refused.reason === 'exists') throw new ConflictError(`schedule "${def.id}" exists already`);
    if (refused.reason === 'caller')
      throw new QuotaError(
        'maxSchedulesPerCaller',
        limits.maxPerCaller,
        `caller "${def.owner}" has ${refused.count} schedules (schedules.maxPerCaller ${limits.maxPerCaller}): the schedule was not added`,
      );
    throw new QuotaError(
      'maxSchedules',
      limits.maxSchedules,
      `the deployment has ${refused.count} schedules (schedules.maxSchedules ${limits.maxSchedules}): the schedule was not added`,
    );
  }
  try {
    await store.schedule(def);
  } catch (error) {
    // Nothing half-written: the record goes with the scheduler that was not made.
    await store.remove(def);
    throw error;
  }
  return (await getSchedule(sp, def.id)) as ScheduleView;
}

export async function getSchedule(sp: ScheduleParts, id: string): Promise<ScheduleView> {
  const found = await sp.store.get(id);
  if (found === null) throw new NotFoundError(`unknown schedule "${id}"`);
  const [next, runs] = await Promise.all([sp.store.nextRuns(), sp.store.runs(id)]);
  return viewOf(found.def, found.state, next.get(id), runs);
}

/** Every schedule, oldest first, with its next and last runs. */
export async function listSchedules(sp: ScheduleParts): Promise<ScheduleView[]> {
  const [all, next] = await Promise.all([sp.store.all(), sp.store.nextRuns()]);
  return Promise.all(
    all.map(async ({ def, state }) => viewOf(def, state, next.get(def.id), await sp.store.runs(def.id))),
  );
}

/** Removes a schedule (a firing that runs now finishes): it fires no more. NotFoundError for an unknown id. */
export async function removeSchedule(sp: ScheduleParts, id: string): Promise<{ id: string; removed: true }> {
  const found = await sp.store.get(id);
  if (found === null) throw new NotFoundError(`unknown schedule "${id}"`);
  // The scheduler first: a firing that finds no definition drops its scheduler too (fire.ts), so either order ends it.
  await sp.store.unschedule(id);
  await sp.store.remove(found.def);
  return { id, removed: true };
}

/** Pauses a schedule: its scheduler goes (no firing until resumed), its record stays. ConflictError for an ended one. */
export async function pauseSchedule(sp: ScheduleParts, id: string): Promise<ScheduleView> {
  const set = await sp.store.setState(id, 'paused');
  if (set === 'missing') throw new NotFoundError(`unknown schedule "${id}"`);
  if (set === 'ended') throw new ConflictError(`schedule "${id}" has ended (its session was deleted): remove it`);
  await sp.store.unschedule(id);
  return getSchedule(sp, id);
}

/** Resumes a paused schedule: its next firing is its timing's next tick from now (the ticks missed are not made up). */
export async function resumeSchedule(sp: ScheduleParts, id: string): Promise<ScheduleView> {
  const set = await sp.store.setState(id, 'active');
  if (set === 'missing') throw new NotFoundError(`unknown schedule "${id}"`);
  if (set === 'ended') throw new ConflictError(`schedule "${id}" has ended (its session was deleted): remove it`);
  const found = await sp.store.get(id);
  if (found !== null) await sp.store.schedule(found.def);
  return getSchedule(sp, id);
}

/** A schedule's last firings (at most 100), newest first: when, the tick, the outcome, the session and turn. */
export async function scheduleRuns(
  sp: ScheduleParts,
  id: string,
): Promise<Array<NonNullable<ScheduleView['lastRun']>>> {
  if ((await sp.store.get(id)) === null) throw new NotFoundError(`unknown schedule "${id}"`);
  return sp.store.recent(id);
}
