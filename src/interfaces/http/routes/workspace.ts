import { z } from 'zod';
import { error, invalid, json, MUTATING_ERRORS, queryInt } from '../route.ts';
import { callerRequest } from '../auth/caller.ts';
import { defineRoute } from './context.ts';

/** `POST /api/sessions/:id/undo` (the body may be empty). */
export const UndoBody = z.strictObject({ force: z.boolean().optional() });

/** `POST /api/sessions/:id/fork`. */
export const ForkBody = z.strictObject({
  as: z.string().min(1).max(100),
  turn: z.number().int().min(1).optional(),
});

export const DiffQuery = z.object({
  turn: queryInt(1, Number.MAX_SAFE_INTEGER).optional(),
  stat: z.enum(['1', '0', 'true', 'false']).optional(),
});

const NO_WORKSPACE =
  'the session has no workspace, a turn runs (or is queued), or the agent cannot go back to a turn; `fork` and `diff`: the server has no workspaces configured';

/** A workspace session's turns (docs/workspaces.md "Undo, fork and diff"): take the last one back, fork at one, what one changed. */
export const workspaceRoutes = [
  defineRoute({
    method: 'post',
    path: '/api/sessions/{id}/undo',
    operationId: 'undoTurn',
    tags: ['workspaces'],
    summary:
      "Take back the session's last completed turn: its workspace files and the agent's conversation are the previous turn's again",
    description:
      "A `workspace.undone` message is appended to the log (the undone turn's messages stay). Refused while a turn runs or is queued unless `force`, which cancels the running turn and waits for it to end first. The first turn cannot be undone.",
    scope: 'write',
    body: {
      schema: UndoBody,
      required: false,
      examples: {
        empty: { summary: 'undo the last turn', value: {} },
        force: { summary: 'cancel a running turn first', value: { force: true } },
      },
    },
    responses: {
      '200': json(
        {
          type: 'object',
          required: ['sessionId', 'undone', 'to', 'snapshot', 'cancelled'],
          properties: {
            sessionId: { type: 'string' },
            undone: { type: 'integer', description: 'the turn taken back' },
            to: { type: 'integer', description: 'the turn whose files and conversation the session has again' },
            snapshot: { type: 'string', description: 'the workspace snapshot the next attempt starts on' },
            cancelled: { type: 'boolean', description: '`force` cancelled a running turn' },
          },
        },
        'the turn was undone',
      ),
      '400': invalid(),
      '404': error('unknown session'),
      '409': error(`${NO_WORKSPACE}; the first turn; the session is being deleted`),
      ...MUTATING_ERRORS,
    },
    handler: async (c, { id, body }, { client }) =>
      c.json(await client.session(id).undo(body.force === true ? { force: true } : {})),
  }),
  defineRoute({
    method: 'post',
    path: '/api/sessions/{id}/fork',
    operationId: 'forkSession',
    tags: ['workspaces'],
    summary:
      'A new session (`as`) with the files and the agent conversation of this one after turn `turn` (default: its last); this one is not changed',
    scope: 'write',
    body: {
      schema: ForkBody,
      examples: {
        last: { summary: 'after the last turn', value: { as: 'my-session-2' } },
        turn: { summary: 'after turn 1', value: { as: 'my-session-try', turn: 1 } },
      },
    },
    responses: {
      '201': json(
        {
          type: 'object',
          required: ['sessionId', 'turn', 'snapshot', 'messages', 'state', 'conversation'],
          properties: {
            sessionId: { type: 'string', description: 'the new session' },
            turn: { type: 'integer', description: "the source's turn it starts after" },
            snapshot: { type: 'string' },
            messages: { type: 'integer', description: "the source's messages up to that turn, copied" },
            state: { type: 'string' },
            conversation: { enum: ['kept', 'forked', 'new'] },
          },
        },
        'the new session',
      ),
      '400': invalid('a bad `as`, or a turn the session has no point of'),
      '404': error('unknown session'),
      '409': error(`${NO_WORKSPACE}; a session \`as\` exists`),
      '429': error("the token's session cap (`maxSessions`) is reached"),
      ...MUTATING_ERRORS,
    },
    async handler(c, { id, body }, { client, auth }) {
      // The new session takes a slot of the token's session cap, as a created one does (auth/caller.ts).
      const { how } = callerRequest(auth, auth.principalOf(c), {});
      const turn = body.turn === undefined ? {} : { turn: body.turn };
      return c.json(await client.session(id).fork({ as: body.as, ...turn, ...how }), 201);
    },
  }),
  defineRoute({
    method: 'get',
    path: '/api/sessions/{id}/diff',
    operationId: 'turnDiff',
    tags: ['workspaces'],
    summary: "What turn `turn` (default: the last) changed in the session's workspace files",
    description:
      "A unified diff from the previous turn's snapshot (turn 1: the session's start); `stat=1`: git's `--stat` summary. Refused while a worker holds the session.",
    scope: 'read',
    parameters: [
      { name: 'turn', in: 'query', schema: { type: 'integer', minimum: 1 } },
      { name: 'stat', in: 'query', schema: { type: 'string', enum: ['1', '0', 'true', 'false'] } },
    ],
    query: DiffQuery,
    responses: {
      '200': json(
        {
          type: 'object',
          required: ['sessionId', 'turn', 'from', 'diff'],
          properties: {
            sessionId: { type: 'string' },
            turn: { type: 'integer' },
            from: { type: 'integer', description: 'the turn the change is counted from (0: the session start)' },
            diff: { type: 'string' },
          },
        },
        "the turn's change",
      ),
      '400': invalid('a bad `turn` or `stat`, or a turn the session has no point of'),
      '404': error('unknown session'),
      '409': error(`${NO_WORKSPACE}; a turn runs`),
    },
    handler: async (c, { id, query }, { client }) =>
      c.json(
        await client.session(id).diff({
          stat: query.stat === '1' || query.stat === 'true',
          ...(query.turn === undefined ? {} : { turn: query.turn }),
        }),
      ),
  }),
];
