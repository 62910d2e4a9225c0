import { ERROR_CODES } from '../../errors.ts';
import { FAILURE_CATEGORIES } from '../../protocol/messages.ts';
import { RetryPolicySchema } from '../../retry/policy.ts';
import { SESSION_STATES } from '../../../machines/states.ts';
import { ref, schemaOf, type Json } from './route.ts';

/** A session parked at a quota wall (in the list and in the detail). */
const PARKED_UNTIL: Json = {
  type: 'object',
  description: "parked at a quota wall: the provider's reset, since when, and whether the attempt was free",
  properties: { until: { type: 'integer' }, since: { type: 'integer' }, free: { type: 'boolean' } },
};

/** The OpenAPI document's `components`: how a caller authenticates, and the schemas several routes answer with. */
export function components(): Json {
  const policy = schemaOf(RetryPolicySchema, 'output');
  return {
    securitySchemes: {
      bearerAuth: {
        type: 'http',
        scheme: 'bearer',
        description: 'a configured token (`SESSIOND_API_TOKEN`, `http.tokens`); its scope must cover the route',
      },
      loginCookie: {
        type: 'apiKey',
        in: 'cookie',
        name: 'sessiond_login',
        description:
          'set by `POST /api/login` (HttpOnly, SameSite=Strict); a mutation with it must carry an allowed `Origin`',
      },
      streamTicket: {
        type: 'apiKey',
        in: 'query',
        name: 'ticket',
        description: "from `POST /api/sessions/{id}/stream-ticket`: opens that session's event stream until it expires",
      },
    },
    schemas: {
      Error: {
        type: 'object',
        required: ['error'],
        properties: {
          error: { type: 'string' },
          code: {
            enum: [...ERROR_CODES],
            description:
              "sessiond's error code, as the library's errors carry it (`not_found`: an unknown session, from every route)",
          },
        },
      },
      Principal: {
        type: 'object',
        required: ['name', 'scope', 'via', 'tenant', 'maxPriority'],
        properties: {
          name: { type: ['string', 'null'] },
          scope: { enum: ['read', 'write', 'admin'] },
          via: { enum: ['bearer', 'cookie', 'ticket', 'open'] },
          tenant: {
            type: 'string',
            description: "the tenant this credential's sessions are recorded under (docs/security.md)",
          },
          maxPriority: { type: 'integer', description: 'the highest priority its requests may ask for' },
          expiresAt: { type: 'integer' },
        },
      },
      ValidationError: {
        type: 'object',
        required: ['error', 'issues'],
        properties: {
          error: { type: 'string' },
          code: { enum: ['invalid_input'] },
          issues: {
            type: 'array',
            items: {
              type: 'object',
              required: ['field', 'message'],
              properties: {
                field: {
                  type: 'string',
                  description: 'dotted path, e.g. `options.model`, `retryPolicy.maxAttempts`, or `(body)`',
                },
                message: { type: 'string' },
              },
            },
          },
        },
      },
      Enqueued: {
        type: 'object',
        required: ['sessionId', 'turn'],
        properties: {
          sessionId: { type: 'string' },
          turn: {
            type: 'integer',
            description: 'the turn this prompt will run as (a steer: the running turn it went into)',
          },
          created: { type: 'boolean' },
          promptId: { type: 'string', description: "the prompt's id (a steer's, in the log's `prompt.steered`)" },
          steered: {
            const: true,
            description: 'whenBusy "steer" found a turn in progress: the prompt is a pending steer of that turn',
          },
          webhookSecret: {
            type: 'string',
            description:
              "with `webhook`: the `whsec_` secret the session's webhook deliveries are signed with, returned only here",
          },
        },
      },
      Attempt: {
        type: 'object',
        required: ['attempt', 'outcome', 'startedAt', 'endedAt'],
        properties: {
          attempt: { type: 'integer' },
          outcome: { enum: ['completed', 'failed', 'interrupted', 'cancelled', null] },
          category: { enum: [...FAILURE_CATEGORIES] },
          errorText: { type: 'string' },
          delayMs: { type: 'integer', description: 'the backoff that followed, when a retry was scheduled' },
          quotaWall: {
            enum: ['free', 'counted'],
            description:
              'it ended on a quota wall (the session parked until the reset); free: not counted against maxAttempts',
          },
          sandbox: {
            enum: ['bwrap', 'landlock', 'none'],
            description: "how the attempt's agent was confined (docs/sandbox.md); absent until its process runs",
          },
          startedAt: { type: 'integer' },
          endedAt: { type: ['integer', 'null'] },
          usage: ref('Usage'),
        },
      },
      Usage: {
        type: 'object',
        description: 'tokens the agent reported in its terminal messages (only the kinds it reported)',
        properties: {
          input: { type: 'number' },
          output: { type: 'number' },
          cacheRead: { type: 'number' },
          cacheWrite: { type: 'number' },
          totalTokens: { type: 'number' },
          cost: { type: 'number' },
        },
      },
      Transition: {
        type: 'object',
        required: ['at', 'from', 'to', 'event'],
        properties: {
          at: { type: 'integer' },
          from: { type: 'string' },
          to: { type: 'string' },
          event: { type: 'string' },
        },
      },
      TurnSummary: {
        type: ['object', 'null'],
        required: ['index', 'status', 'attempts'],
        properties: {
          index: { type: 'integer' },
          status: { enum: ['queued', 'running', 'backoff', 'parked', 'completed', 'failed', 'cancelled'] },
          prompt: { type: ['string', 'null'] },
          failureReason: { type: 'string' },
          cancelReason: { type: 'string' },
          attempts: { type: 'array', items: ref('Attempt') },
          usage: ref('Usage'),
          attemptsCounted: {
            type: 'integer',
            description: 'attempts counted against maxAttempts (free quota walls are not)',
          },
        },
      },
      SessionList: {
        type: 'object',
        required: ['sessions', 'next'],
        properties: {
          next: {
            type: ['string', 'null'],
            description:
              'the cursor of the next page (`?cursor=`), null on the last page; a filtered page may hold fewer than `limit` sessions and still have one',
          },
          scanned: {
            type: 'integer',
            description:
              "how many sessions of the listing's index this page looked at (the filters match them one by one)",
          },
          sessions: {
            type: 'array',
            items: {
              type: 'object',
              required: ['sessionId', 'state', 'agent', 'createdAt', 'updatedAt', 'turn', 'queuedPrompts'],
              properties: {
                sessionId: { type: 'string' },
                state: { type: 'string', enum: SESSION_STATES },
                agent: { type: 'string' },
                createdAt: { type: 'integer' },
                updatedAt: { type: 'integer' },
                turn: {
                  type: ['object', 'null'],
                  properties: {
                    index: { type: 'integer' },
                    status: { type: 'string' },
                    attempts: { type: 'integer' },
                    prompt: { type: ['string', 'null'], description: "the turn's prompt, its first 200 characters" },
                    promptLength: {
                      type: 'integer',
                      description:
                        "the whole prompt's length in characters (more than 200: `GET /api/sessions/{id}` has it all)",
                    },
                  },
                },
                nextRetryAt: { type: 'integer' },
                parkedUntil: PARKED_UNTIL,
                lastFailure: { type: 'object', properties: { category: { type: 'string' }, at: { type: 'integer' } } },
                queuedPrompts: { type: 'integer' },
              },
            },
          },
        },
      },
      SessionDetail: {
        type: 'object',
        required: ['sessionId', 'state', 'agent', 'turn', 'history', 'policy', 'policySource', 'lastSeq', 'context'],
        properties: {
          sessionId: { type: 'string' },
          state: { type: 'string', enum: SESSION_STATES },
          agent: { type: 'string' },
          createdAt: { type: 'integer' },
          updatedAt: { type: 'integer' },
          agentSessionId: { type: ['string', 'null'] },
          webhook: {
            type: 'string',
            description: "the session's own webhook URL (`webhook` of the enqueue); its secret is never shown",
          },
          turn: ref('TurnSummary'),
          nextRetryAt: { type: 'integer' },
          parkedUntil: PARKED_UNTIL,
          lastFailure: {
            type: 'object',
            properties: { category: { type: 'string' }, errorText: { type: 'string' }, at: { type: 'integer' } },
          },
          usage: {
            type: 'object',
            description:
              'tokens the session’s attempts reported, summed, in all and per agent and model (absent: none reported)',
            properties: {
              total: ref('Usage'),
              byModel: {
                type: 'array',
                items: {
                  type: 'object',
                  properties: { agent: { type: 'string' }, model: { type: 'string' }, usage: ref('Usage') },
                },
              },
            },
          },
          policy: {},
          policySource: { enum: ['session', 'global'] },
          queuedPrompts: { type: 'integer' },
          steers: {
            type: 'array',
            description:
              'steers (whenBusy "steer") accepted for the running turn and not delivered yet, oldest first; one left when the turn ends becomes the next turn',
            items: {
              type: 'object',
              required: ['id', 'text', 'acceptedAt'],
              properties: { id: { type: 'string' }, text: { type: 'string' }, acceptedAt: { type: 'integer' } },
            },
          },
          history: { type: 'array', items: ref('Transition') },
          lastSeq: { type: 'integer' },
          heldBy: { type: ['string', 'null'], description: 'the worker holding the session, if any' },
          approvals: {
            type: 'array',
            description:
              'permission requests of the running turn not yet given to the agent; the session awaits approval while one has no `decision` (answer with POST …/approvals/{requestId})',
            items: {
              type: 'object',
              required: ['requestId', 'tool', 'arguments', 'options', 'requestedAt', 'deadlineAt'],
              properties: {
                requestId: { type: 'string' },
                tool: { type: 'string' },
                kind: { type: 'string' },
                arguments: {},
                options: {
                  type: 'array',
                  items: {
                    type: 'object',
                    properties: { optionId: { type: 'string' }, name: { type: 'string' }, kind: { type: 'string' } },
                  },
                },
                requestedAt: { type: 'integer' },
                deadlineAt: { type: 'integer' },
                decision: { type: 'object' },
              },
            },
          },
          options: { type: 'object' },
          queued: {
            type: 'array',
            items: {
              type: 'object',
              properties: { id: { type: 'string' }, text: { type: 'string' }, enqueuedAt: { type: 'integer' } },
            },
          },
          cancelRequested: { type: 'boolean' },
          context: {
            type: ['object', 'null'],
            description:
              "the session machine's context (turn, attempt, attempts history, nextRetryAt, mailbox, policy…)",
          },
        },
      },
      Message: {
        type: 'object',
        required: ['seq', 'turn', 'attempt', 'type', 'content'],
        properties: {
          seq: { type: 'integer' },
          turn: { type: 'integer' },
          attempt: { type: 'integer' },
          type: { type: 'string' },
          content: {},
        },
      },
      MessagePage: {
        type: 'object',
        required: ['sessionId', 'from', 'messages', 'nextFrom', 'lastSeq'],
        properties: {
          sessionId: { type: 'string' },
          from: { type: 'integer' },
          messages: { type: 'array', items: ref('Message') },
          nextFrom: { type: 'integer' },
          lastSeq: { type: 'integer' },
        },
      },
      RetryPolicy: policy,
      PolicyResponse: {
        type: 'object',
        required: ['policy', 'source'],
        properties: { policy: ref('RetryPolicy'), source: { enum: ['session', 'global', 'default'] } },
      },
      Chart: {
        type: 'object',
        required: ['id', 'initial', 'states'],
        properties: {
          id: { type: 'string' },
          initial: { type: ['string', 'null'] },
          states: {
            type: 'array',
            items: {
              type: 'object',
              properties: {
                name: { type: 'string' },
                invokes: { type: 'array', items: { type: 'string' } },
                transitions: {
                  type: 'array',
                  items: {
                    type: 'object',
                    properties: {
                      event: { type: 'string' },
                      target: { type: ['string', 'null'] },
                      guard: { type: ['string', 'null'] },
                    },
                  },
                },
              },
            },
          },
        },
      },
    },
  };
}
