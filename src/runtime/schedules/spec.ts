import { defaultRepeatStrategy } from 'bullmq';
import { z } from 'zod';
import { parseDuration } from '../../config/duration.ts';
import { InputError, type FieldIssue } from '../../errors.ts';
import { SESSION_ID_PATTERN } from '../keys.ts';
import { SCHEDULE_DEFAULTS, type ScheduleLimits } from '../../config/defaults.ts';

export { SCHEDULE_DEFAULTS, type ScheduleLimits };

/** A schedule's id: no `.` or `:` (BullMQ's scheduler job ids are `repeat:<id>:<millis>`; a new session is `<id>.<tick>`). */
export const SCHEDULE_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * What `schedule add` takes: when (`cron` with an optional `tz`, or `every`), where (`sessionId`, or `new` for a new
 * session per firing) and the prompt with the enqueue fields (`options`, `retention`, `priority`, `whenBusy`,
 * `tenant`…) each firing enqueues with.
 */
export const ScheduleRequestSchema = z.strictObject({
  /** The schedule's own id (default: `sch-` and 8 random hex digits). */
  id: z.string().regex(SCHEDULE_ID_PATTERN, 'must be 1-64 letters, digits, _ or -').optional(),
  cron: z.string().min(1, 'must not be empty').max(200, 'must be at most 200 characters').optional(),
  tz: z.string().min(1, 'must not be empty').max(100, 'must be at most 100 characters').optional(),
  every: z.union([z.string(), z.number().int().positive()]).optional(),
  sessionId: z.string().regex(SESSION_ID_PATTERN, 'must be 1-100 letters, digits or _.-, and not . or ..').optional(),
  new: z.boolean().optional(),
  prompt: z.string().refine((p) => p.trim() !== '', 'must not be empty'),
  options: z.record(z.string(), z.unknown()).optional(),
  retryPolicy: z.record(z.string(), z.unknown()).optional(),
  retention: z.union([z.string(), z.number().int().nonnegative()]).optional(),
  tenant: z.string().optional(),
  priority: z.number().optional(),
  whenBusy: z.string().optional(),
});
export type ScheduleRequest = z.input<typeof ScheduleRequestSchema>;

/** When a schedule fires: a cron expression (and its time zone) or a fixed interval. */
export type ScheduleTiming = { cron: string; tz?: string } | { everyMs: number };

/** The enqueue request each firing sends (its `sessionId` the schedule's session, or `<id>.<tick>` for `new`). */
export interface ScheduledEnqueue {
  prompt: string;
  options?: Record<string, unknown>;
  retryPolicy?: Record<string, unknown>;
  retention?: string | number;
  tenant?: string;
  priority?: number;
  whenBusy?: string;
}

/** A schedule as stored (the definition; its runs are kept apart: ScheduleRuns). */
export interface ScheduleDefinition {
  id: string;
  timing: ScheduleTiming;
  /** The session every firing prompts, or null: a new session per firing (`<id>.<tick>`). */
  sessionId: string | null;
  request: ScheduledEnqueue;
  /** Who added it (a token's name, `local` for the CLI and the library): the per-caller limit counts by it. */
  owner: string;
  /** A token's session cap, held by each new session a firing creates. */
  ownerCap?: { name: string; maxSessions: number };
  createdAt: number;
}

/** The outcomes of a firing (metrics `sessiond_schedule_firings_total{outcome}`, `schedule list`'s last outcome). */
export const FIRING_OUTCOMES = ['enqueued', 'rejected_busy', 'refused', 'session_deleted', 'failed'] as const;
export type FiringOutcome = (typeof FIRING_OUTCOMES)[number];

/** What `schedule list` shows of a schedule: its definition, its next run and its last one. */
export interface ScheduleView {
  id: string;
  cron?: string;
  tz?: string;
  everyMs?: number;
  /** The session it prompts; null: a new session per firing. */
  sessionId: string | null;
  prompt: string;
  whenBusy: string;
  owner: string;
  createdAt: number;
  /** `active`, `paused`, or `ended` (its session was deleted: `endedReason`). */
  status: 'active' | 'paused' | 'ended';
  endedReason?: string;
  /** When it fires next (epoch ms); null while paused or ended. */
  nextRunAt: number | null;
  /** Its last firing: when it ran, the tick it was for, the outcome, the session and turn it made (if any), why it was refused. */
  lastRun: {
    at: number;
    tick: number;
    outcome: FiringOutcome;
    sessionId?: string;
    turn?: number;
    error?: string;
  } | null;
  /** Firings so far, by outcome. */
  firings: Partial<Record<FiringOutcome, number>>;
}

/** One firing of a schedule, as recorded. */
export type ScheduleRun = NonNullable<ScheduleView['lastRun']>;

/**
 * The request checked for its own fields (the enqueue fields are checked by the enqueue path: checkEnqueue), with
 * the deployment's bounds: the timing (a valid cron expression in a valid zone, or a duration), at least
 * `minIntervalMs` between firings. Throws an InputError naming every bad field; pure, writes nothing.
 */
export function parseScheduleRequest(
  input: unknown,
  limits: ScheduleLimits,
  now = Date.now(),
): { id: string | undefined; timing: ScheduleTiming; sessionId: string | null; request: ScheduledEnqueue } {
  const parsed = ScheduleRequestSchema.safeParse(input);
  if (!parsed.success)
    throw new InputError(parsed.error.issues.map((i) => ({ field: i.path.join('.') || '(body)', message: i.message })));
  const body = parsed.data;
  const issues: FieldIssue[] = [];
  let timing: ScheduleTiming | null = null;
  if (body.cron !== undefined && body.every !== undefined)
    issues.push({ field: 'every', message: 'give either cron or every, not both' });
  else if (body.cron === undefined && body.every === undefined)
    issues.push({ field: 'cron', message: 'give either cron (with an optional tz) or every' });
  else if (body.every !== undefined) {
    if (body.tz !== undefined) issues.push({ field: 'tz', message: 'goes with cron, not every' });
    const ms = typeof body.every === 'number' ? { ok: true as const, ms: body.every } : parseDuration(body.every);
    if (!ms.ok) issues.push({ field: 'every', message: ms.message });
    else if (ms.ms < limits.minIntervalMs)
      issues.push({
        field: 'every',
        message: `must be at least ${limits.minIntervalMs} ms (the deployment's schedules.minInterval)`,
      });
    else timing = { everyMs: ms.ms };
  } else if (body.cron !== undefined) {
    const tzIssue = body.tz === undefined ? null : zoneIssue(body.tz);
    if (tzIssue !== null) issues.push({ field: 'tz', message: tzIssue });
    else {
      const cron = { cron: body.cron.trim(), ...(body.tz === undefined ? {} : { tz: body.tz }) };
      const gap = cronIssue(cron, limits.minIntervalMs, now);
      if (gap !== null) issues.push({ field: 'cron', message: gap });
      else timing = cron;
    }
  }
  if (body.sessionId !== undefined && body.new === true)
    issues.push({ field: 'new', message: 'give either sessionId or new, not both' });
  else if (body.sessionId === undefined && body.new !== true)
    issues.push({
      field: 'sessionId',
      message: 'give the session to prompt, or new: true for a new session per firing',
    });
  if (issues.length > 0 || timing === null) throw new InputError(issues);
  const { id, cron: _c, tz: _t, every: _e, sessionId, new: _n, ...request } = body;
  return { id, timing, sessionId: sessionId ?? null, request };
}

/** Null when `tz` is an IANA time zone this process knows, else why not. */
function zoneIssue(tz: string): string | null {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return null;
  } catch {
    // Intl's RangeError says only "invalid time zone": the message below names the value.
    return `${JSON.stringify(tz)} is not a time zone (an IANA name such as Europe/Paris or UTC)`;
  }
}

/** How many firings of a cron expression are looked at for the shortest gap between two. */
const GAPS_CHECKED = 16;

/**
 * Null when BullMQ's own strategy (the one its job schedulers run) can compute the expression's firings and no two of
 * the next few are closer than `minIntervalMs`; else why not.
 */
function cronIssue(timing: { cron: string; tz?: string }, minIntervalMs: number, now: number): string | null {
  const opts = { pattern: timing.cron, ...(timing.tz === undefined ? {} : { tz: timing.tz }) };
  let at: number | undefined;
  try {
    at = defaultRepeatStrategy(now, opts);
  } catch (error) {
    return `${JSON.stringify(timing.cron)} is not a cron expression (${error instanceof Error ? error.message : String(error)}); e.g. "0 9 * * 1-5" (minute hour day month weekday, an optional seconds field first)`;
  }
  if (at === undefined) return `${JSON.stringify(timing.cron)} never fires`;
  for (let i = 0; i < GAPS_CHECKED; i += 1) {
    const next = defaultRepeatStrategy(at, opts);
    if (next === undefined) break;
    if (next - at < minIntervalMs)
      return `fires ${next - at} ms apart; must be at least ${minIntervalMs} ms (the deployment's schedules.minInterval)`;
    at = next;
  }
  return null;
}
