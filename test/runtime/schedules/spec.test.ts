import { describe, expect, it } from 'vitest';
import { InputError } from '../../../src/errors.ts';
import { parseField, scheduleFiringField } from '../../../src/runtime/counters.ts';
import { scheduleOfPrompt, schedulePromptId } from '../../../src/runtime/schedules/prompt-id.ts';
import { parseScheduleRequest, SCHEDULE_DEFAULTS } from '../../../src/runtime/schedules/spec.ts';

/** A schedule's own fields, checked before anything is written (pure: no Redis). */

const issues = (input: unknown, limits = SCHEDULE_DEFAULTS): Array<{ field: string; message: string }> => {
  try {
    parseScheduleRequest(input, limits);
  } catch (error) {
    if (error instanceof InputError) return error.issues;
    throw error;
  }
  return [];
};

describe('parseScheduleRequest', () => {
  it('takes a cron expression with a zone, or an interval, and a target', () => {
    expect(
      parseScheduleRequest({ cron: ' 0 9 * * 1-5 ', tz: 'Europe/Paris', new: true, prompt: 'p' }, SCHEDULE_DEFAULTS),
    ).toEqual({
      id: undefined,
      timing: { cron: '0 9 * * 1-5', tz: 'Europe/Paris' },
      sessionId: null,
      request: { prompt: 'p' },
    });
    expect(
      parseScheduleRequest(
        { id: 'a_b-1', every: '15m', sessionId: 's.1', prompt: 'p', whenBusy: 'reject' },
        SCHEDULE_DEFAULTS,
      ),
    ).toEqual({
      id: 'a_b-1',
      timing: { everyMs: 900_000 },
      sessionId: 's.1',
      request: { prompt: 'p', whenBusy: 'reject' },
    });
  });

  it('names the field of each bad input', () => {
    expect(issues({ cron: '0 25 * * *', new: true, prompt: 'p' }).map((i) => i.field)).toEqual(['cron']);
    expect(issues({ cron: '0 9 * * *', tz: 'Nowhere/Else', new: true, prompt: 'p' })).toEqual([
      { field: 'tz', message: expect.stringContaining('"Nowhere/Else" is not a time zone') },
    ]);
    expect(issues({ every: '5 minutes', new: true, prompt: 'p' }).map((i) => i.field)).toEqual(['every']);
    expect(issues({ every: '30s', new: true, prompt: 'p' })).toEqual([
      { field: 'every', message: expect.stringContaining('at least 60000 ms') },
    ]);
    expect(issues({ cron: '*/10 * * * * *', new: true, prompt: 'p' })).toEqual([
      { field: 'cron', message: expect.stringContaining('fires 10000 ms apart') },
    ]);
    expect(issues({ every: '1h', new: true, prompt: ' ' }).map((i) => i.field)).toEqual(['prompt']);
    expect(issues({ every: '1h', new: true }).map((i) => i.field)).toEqual(['prompt']);
    expect(issues({ new: true, prompt: 'p' }).map((i) => i.field)).toEqual(['cron']);
    expect(issues({ every: '1h', prompt: 'p' }).map((i) => i.field)).toEqual(['sessionId']);
    expect(issues({ every: '1h', sessionId: 's', new: true, prompt: 'p' }).map((i) => i.field)).toEqual(['new']);
    expect(issues({ every: '1h', tz: 'UTC', new: true, prompt: 'p' }).map((i) => i.field)).toEqual(['tz']);
    expect(issues({ id: 'a:b', every: '1h', new: true, prompt: 'p' }).map((i) => i.field)).toEqual(['id']);
    expect(issues({ every: '1h', new: true, prompt: 'p', colour: 'red' }).map((i) => i.field)).toEqual(['(body)']);
    // The deployment's minimum is its own: 10 s allows a cron every 10 s.
    expect(
      issues({ cron: '*/10 * * * * *', new: true, prompt: 'p' }, { ...SCHEDULE_DEFAULTS, minIntervalMs: 10_000 }),
    ).toEqual([]);
  });
});

describe('what a firing leaves', () => {
  it('a prompt id names its schedule and tick; any other id names none', () => {
    expect(scheduleOfPrompt(schedulePromptId('nightly', 1_796_305_486_404))).toEqual({
      id: 'nightly',
      tick: 1_796_305_486_404,
    });
    expect(scheduleOfPrompt('3f0c6f7e-1111-4a2b-9c3d-000000000000')).toBeNull();
    expect(scheduleOfPrompt('schedule:x:soon')).toBeNull();
    expect(scheduleOfPrompt(undefined)).toBeNull();
  });

  it('the counter field of a firing parses back to its outcome', () => {
    expect(parseField(scheduleFiringField('rejected_busy'))).toEqual({ kind: 'schedule', outcome: 'rejected_busy' });
  });
});
