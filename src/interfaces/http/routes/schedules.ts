import { ScheduleRequestSchema } from '../../../runtime/schedules/spec.ts';
import { HttpError } from '../body.ts';
import { callerRequest } from '../auth/caller.ts';
import { error, invalid, json, MUTATING_ERRORS } from '../route.ts';
import { defineRoute } from './context.ts';

/** A schedule as `GET /api/schedules` lists it (src/runtime/schedules/spec.ts ScheduleView). */
const SCHEDULE = {
  type: 'object',
  required: [
    'id',
    'sessionId',
    'prompt',
    'whenBusy',
    'owner',
    'createdAt',
    'status',
    'nextRunAt',
    'lastRun',
    'firings',
  ],
  properties: {
    id: { type: 'string' },
    cron: { type: 'string' },
    tz: { type: 'string' },
    everyMs: { type: 'integer' },
    sessionId: { type: ['string', 'null'], description: 'null: a new session per firing, `<id>.<tick>`' },
    prompt: { type: 'string' },
    whenBusy: { type: 'string' },
    owner: { type: 'string', description: 'the token (or `local`) that added it: schedules.maxPerCaller counts by it' },
    createdAt: { type: 'integer' },
    status: { type: 'string', enum: ['active', 'paused', 'ended'] },
    endedReason: { type: 'string', description: '`session_deleted`: its session was deleted, it fires no more' },
    nextRunAt: { type: ['integer', 'null'], description: 'epoch ms; null while paused or ended' },
    firings: { type: 'object', additionalProperties: { type: 'integer' }, description: 'firings so far by outcome' },
  },
};
const RUN = {
  type: 'object',
  required: ['at', 'tick', 'outcome'],
  properties: {
    at: { type: 'integer' },
    tick: { type: 'integer', description: 'the time the firing was scheduled for (epoch ms)' },
    outcome: { type: 'string', enum: ['enqueued', 'rejected_busy', 'refused', 'session_deleted', 'failed'] },
    sessionId: { type: 'string' },
    turn: { type: 'integer' },
    error: { type: 'string' },
  },
};
/** Inline here (not in components.ts): the schedules' shapes, kept with their routes. */
const SCHEDULE_JSON = {
  ...SCHEDULE,
  properties: { ...SCHEDULE.properties, lastRun: { oneOf: [RUN, { type: 'null' }] } },
};
const SCHEDULE_PARAM = {
  name: 'schedule',
  in: 'path',
  required: true,
  description: 'Schedule id (1-64 letters, digits, _ or -)',
  schema: { type: 'string', pattern: '^[A-Za-z0-9_-]{1,64}$' },
};
const UNKNOWN = error('unknown schedule');

/** Schedules: a prompt on a cron expression or an interval (docs/schedules.md). */
export const scheduleRoutes = [
  defineRoute({
    method: 'get',
    path: '/api/schedules',
    operationId: 'listSchedules',
    tags: ['schedules'],
    summary: 'Every schedule, oldest first, with its next run, its last run and outcome, and its firings by outcome',
    scope: 'read',
    responses: {
      '200': json(
        { type: 'object', required: ['schedules'], properties: { schedules: { type: 'array', items: SCHEDULE_JSON } } },
        'the schedules',
      ),
    },
    handler: async (c, _input, { client }) => c.json({ schedules: await client.schedules.list() }),
  }),
  defineRoute({
    method: 'post',
    path: '/api/schedules',
    operationId: 'createSchedule',
    tags: ['schedules'],
    summary:
      'Add a schedule: (`cron` [`tz`] | `every`) (`sessionId` | `new`), the prompt and the enqueue fields each firing sends',
    description:
      "Each firing is the enqueue the body describes, checked now as that enqueue would be (the deployment policy, `whenBusy`, the options: a 400 naming the field) and again when it fires. The workers fire it, once per tick fleet-wide. With `new`, each firing makes a session `<id>.<tick>`; a token's maxSessions holds each. Bounded by `schedules.max`, `schedules.maxPerCaller` (by token) and `schedules.minInterval`.",
    scope: 'write',
    body: {
      schema: ScheduleRequestSchema,
      examples: {
        cron: {
          summary: 'weekdays at 9:00 in Paris, a new session each time',
          value: { cron: '0 9 * * 1-5', tz: 'Europe/Paris', new: true, prompt: 'Run the test suite' },
        },
        every: {
          summary: 'every hour into one session (it must exist), refused while its turn runs',
          value: { id: 'hourly', every: '1h', sessionId: 'build-42', prompt: 'Check the logs', whenBusy: 'reject' },
        },
      },
    },
    responses: {
      '201': json(SCHEDULE_JSON, 'added; its first firing is scheduled'),
      '400': invalid(
        'a field is invalid (a cron expression, a time zone, a duration, the prompt, any enqueue field): `issues` name each one',
      ),
      '404': error('unknown session (`sessionId`)'),
      '409': error('a schedule with this `id` exists'),
      '429': error(
        'the deployment or the caller has its most schedules (`limit`: maxSchedules, maxSchedulesPerCaller): nothing was added',
      ),
      ...MUTATING_ERRORS,
    },
    async handler(c, { body }, { client, auth }) {
      const principal = auth.principalOf(c);
      // A retry policy is the admin's to set, as with a session's.
      if (body.retryPolicy !== undefined && principal?.scope !== 'admin')
        throw new HttpError(403, 'setting a retry policy needs an admin token', [
          { field: 'retryPolicy', message: 'needs scope admin' },
        ]);
      const { request, how } = callerRequest(auth, principal, body);
      const view = await client.schedules.add(request, {
        caller: principal?.name ?? 'local',
        ...(how.owner === undefined ? {} : { owner: how.owner }),
      });
      return c.json(view, 201);
    },
  }),
  defineRoute({
    method: 'get',
    path: '/api/schedules/{schedule}',
    operationId: 'getSchedule',
    tags: ['schedules'],
    summary: 'A schedule, with its next run and its last one',
    scope: 'read',
    parameters: [SCHEDULE_PARAM],
    responses: { '200': json(SCHEDULE_JSON, 'the schedule'), '404': UNKNOWN },
    handler: async (c, _input, { client }) => c.json(await client.schedules.get(c.req.param('schedule') ?? '')),
  }),
  defineRoute({
    method: 'get',
    path: '/api/schedules/{schedule}/runs',
    operationId: 'getScheduleRuns',
    tags: ['schedules'],
    summary: "A schedule's last firings (at most 100), newest first",
    scope: 'read',
    parameters: [SCHEDULE_PARAM],
    responses: {
      '200': json(
        {
          type: 'object',
          required: ['id', 'runs'],
          properties: { id: { type: 'string' }, runs: { type: 'array', items: RUN } },
        },
        'its firings',
      ),
      '404': UNKNOWN,
    },
    handler: async (c, _input, { client }) => {
      const id = c.req.param('schedule') ?? '';
      return c.json({ id, runs: await client.schedules.runs(id) });
    },
  }),
  defineRoute({
    method: 'delete',
    path: '/api/schedules/{schedule}',
    operationId: 'deleteSchedule',
    tags: ['schedules'],
    summary: 'Remove a schedule: it fires no more (a firing under way finishes)',
    scope: 'write',
    parameters: [SCHEDULE_PARAM],
    responses: {
      '200': json({ type: 'object', required: ['id', 'removed'] }, 'removed'),
      '404': UNKNOWN,
      ...MUTATING_ERRORS,
    },
    handler: async (c, _input, { client }) => c.json(await client.schedules.remove(c.req.param('schedule') ?? '')),
  }),
  ...(['pause', 'resume'] as const).map((verb) =>
    defineRoute({
      method: 'post',
      path: `/api/schedules/{schedule}/${verb}`,
      operationId: `${verb}Schedule`,
      tags: ['schedules'],
      summary:
        verb === 'pause'
          ? 'Pause a schedule: no firing until it is resumed'
          : 'Resume a paused schedule from its next tick (the ticks missed are not made up)',
      scope: 'write',
      parameters: [SCHEDULE_PARAM],
      responses: {
        '200': json(SCHEDULE_JSON, 'the schedule now'),
        '404': UNKNOWN,
        '409': error('the schedule has ended (its session was deleted)'),
        ...MUTATING_ERRORS,
      },
      handler: async (c, _input, { client }) => {
        const id = c.req.param('schedule') ?? '';
        return c.json(verb === 'pause' ? await client.schedules.pause(id) : await client.schedules.resume(id));
      },
    }),
  ),
];
