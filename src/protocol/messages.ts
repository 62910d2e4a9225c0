import { z } from 'zod';
import { FAILURE_CATEGORIES } from './failure-categories.ts';

/**
 * The shared message contract. Every layer speaks only this.
 * Contract: `type` discriminates; `content` holds at least the fields below.
 */

export { FAILURE_CATEGORIES };

export const FailureCategorySchema = z.enum(FAILURE_CATEGORIES);
export type FailureCategory = z.infer<typeof FailureCategorySchema>;

const SessionContent = z.object({ sessionId: z.string() });
const TextContent = z.object({ text: z.string() });
const ToolCallContent = z.object({
  toolCallId: z.string(),
  name: z.string(),
  arguments: z.unknown(),
});
const ToolUpdateContent = ToolCallContent.extend({ partialResult: z.unknown().optional() });

export const UsageSchema = z.object({
  input: z.number().optional(),
  output: z.number().optional(),
  cacheRead: z.number().optional(),
  cacheWrite: z.number().optional(),
  totalTokens: z.number().optional(),
  cost: z.number().optional(),
});
export type Usage = z.infer<typeof UsageSchema>;

export const TerminalFailedContentSchema = z.object({
  text: z.string(),
  category: FailureCategorySchema,
  retryAfterMs: z.number().int().nonnegative().optional(),
  exitCode: z.number().int().optional(),
  signal: z.string().optional(),
  stderr: z.string(),
  invalid_output_lines: z.array(z.string()),
  agentError: z.string().optional(),
  /** The agent's own session holds this attempt's prompt: a retry must not send it again. */
  promptRecorded: z.boolean().optional(),
});
export type TerminalFailedContent = z.infer<typeof TerminalFailedContentSchema>;

/** One choice an agent offers for a permission request (ACP's PermissionOption). */
export const ApprovalOptionSchema = z.object({
  optionId: z.string(),
  name: z.string(),
  /** `allow_once`, `allow_always`, `reject_once`, `reject_always` (ACP's kinds). */
  kind: z.string(),
});
export type ApprovalOption = z.infer<typeof ApprovalOptionSchema>;

export const ApprovalRequestedContentSchema = z.object({
  /** Stable across re-asks of the same request (after a worker died, by a later attempt). */
  requestId: z.string(),
  toolCallId: z.string(),
  tool: z.string(),
  /** The tool's kind as the agent reports it (ACP: read, edit, execute, …), when it does. */
  kind: z.string().optional(),
  arguments: z.unknown(),
  options: z.array(ApprovalOptionSchema),
  requestedAt: z.number(),
  /** When the deployment policy's deadline denies it. */
  deadlineAt: z.number(),
  /** The same request asked again by a later attempt (its first ask is in an earlier one). */
  reasked: z.boolean().optional(),
});

export const ApprovalDecidedContentSchema = z.object({
  requestId: z.string(),
  toolCallId: z.string(),
  outcome: z.enum(['allowed', 'denied']),
  /** The option given to the agent; null: the request was answered `cancelled` (no reject option offered). */
  optionId: z.string().nullable(),
  /** Who decided: `cli:<user>`, `http:<token name>`, `acp`, `policy` (a rule), `deadline`, `sessiond` (nobody to ask). */
  by: z.string(),
  at: z.number(),
  reason: z.string().optional(),
});

export const PromptSteeredContentSchema = z.object({
  /** The id the caller got when the steer was accepted. */
  promptId: z.string(),
  via: z.enum(['native', 'restart', 'turn']),
  /**
   * When it was delivered (native: the agent took it; restart: a record of the agent's state holding it was made,
   * written with it) or made a turn of its own (turn).
   */
  at: z.number(),
  /** `via: "turn"`: the turn it became. */
  turn: z.number().int().optional(),
});

export const CliMessageSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('session.started'), content: SessionContent }),
  z.object({ type: z.literal('session.resumed'), content: SessionContent }),
  z.object({ type: z.literal('assistant'), content: TextContent }),
  z.object({ type: z.literal('assistant.thought'), content: TextContent }),
  z.object({ type: z.literal('tool.call'), content: ToolCallContent }),
  z.object({ type: z.literal('tool.update'), content: ToolUpdateContent }),
  z.object({
    type: z.literal('tool.completed'),
    content: z.object({ toolCallId: z.string(), name: z.string(), result: z.unknown() }),
  }),
  z.object({
    type: z.literal('tool.failed'),
    content: z.object({ toolCallId: z.string(), name: z.string(), error: z.unknown() }),
  }),
  z.object({
    type: z.literal('agent.retry'),
    content: z.object({
      phase: z.enum(['start', 'end']),
      attempt: z.number().int().optional(),
      maxAttempts: z.number().int().optional(),
      delayMs: z.number().optional(),
      success: z.boolean().optional(),
      errorText: z.string().optional(),
    }),
  }),
  z.object({ type: z.literal('approval.requested'), content: ApprovalRequestedContentSchema }),
  z.object({ type: z.literal('approval.decided'), content: ApprovalDecidedContentSchema }),
  /**
   * sessiond, not the agent: a steer (a prompt sent with whenBusy "steer") reached the turn: `native` through the
   * agent's own channel, `restart` by stopping the attempt at a tool boundary and going on with its text in the
   * same turn (written once a record of the agent's state holds it, in the same fenced write: after the resumed
   * run's first messages); `turn` (attempt 0 of turn `turn`): the turn it was sent to ended first, so it became
   * that turn.
   */
  z.object({ type: z.literal('prompt.steered'), content: PromptSteeredContentSchema }),
  z.object({
    type: z.literal('terminal.completed'),
    content: z.object({
      stopReason: z.string(),
      usage: UsageSchema.optional(),
      invalid_output_lines: z.array(z.string()).optional(),
    }),
  }),
  z.object({ type: z.literal('terminal.failed'), content: TerminalFailedContentSchema }),
  /**
   * sessiond, not the agent: the attempt was cancelled (`sessiond cancel`, ACP's session/cancel) and its processes
   * are gone. Written instead of the agent's own end, so every attempt ends once in the log.
   */
  z.object({ type: z.literal('terminal.cancelled'), content: z.object({ reason: z.string() }) }),
  /**
   * sessiond, not the agent: the session's last turn was taken back (`sessiond undo`, docs/workspaces.md): its
   * files and the agent's conversation are those after turn `to` (0: the session's start) again. The messages
   * of the undone turn stay in the log; this one says they no longer count.
   */
  z.object({
    type: z.literal('workspace.undone'),
    content: z.object({
      turn: z.number().int(),
      to: z.number().int(),
      snapshot: z.string(),
      /** Taken back by a prompt sent with `whenBusy: "rollback"` (the turn was interrupted), not by `sessiond undo`. */
      rollback: z.boolean().optional(),
    }),
  }),
  /**
   * sessiond, not the agent: turn `turn` was interrupted by a prompt sent with `whenBusy: "rollback"` but could not
   * be taken back (`reason`: why, e.g. the session runs without a workspace); its files and conversation stay.
   */
  z.object({
    type: z.literal('workspace.not_undone'),
    content: z.object({ turn: z.number().int(), reason: z.string() }),
  }),
]);

export type CliMessage = z.infer<typeof CliMessageSchema>;
export type CliMessageType = CliMessage['type'];
export type MessageOf<T extends CliMessageType> = Extract<CliMessage, { type: T }>;
export type TerminalMessage =
  MessageOf<'terminal.completed'> | MessageOf<'terminal.failed'> | MessageOf<'terminal.cancelled'>;
/** How an agent ends its attempt (`terminal.cancelled` is sessiond's, never an agent's). */
export type AgentTerminalMessage = MessageOf<'terminal.completed'> | MessageOf<'terminal.failed'>;

/** The `content` of a message of type `T`. */
export type ContentOf<T extends CliMessageType> = MessageOf<T>['content'];
/** `session.started` and `session.resumed`: the agent's own session id (a resumed attempt keeps it). */
export type SessionContent = ContentOf<'session.started'>;
/** `assistant` (new text only, never the whole answer so far) and `assistant.thought`. */
export type TextContent = ContentOf<'assistant'>;
/** `tool.call`: the agent starts a tool; `toolCallId` pairs it with its update and its one result. */
export type ToolCallContent = ContentOf<'tool.call'>;
/** `tool.update`: the call's arguments completed, or a partial result. */
export type ToolUpdateContent = ContentOf<'tool.update'>;
/** `tool.completed`: the call's result. */
export type ToolCompletedContent = ContentOf<'tool.completed'>;
/** `tool.failed`: the call's error; sessiond's own when the attempt ended with the call open. */
export type ToolFailedContent = ContentOf<'tool.failed'>;
/** `agent.retry`: the agent retried on its own (told, not acted on). */
export type AgentRetryContent = ContentOf<'agent.retry'>;
/** `approval.requested`: a permission request waiting for an operator. */
export type ApprovalRequestedContent = ContentOf<'approval.requested'>;
/** `approval.decided`: its decision, and who made it. */
export type ApprovalDecidedContent = ContentOf<'approval.decided'>;
/** `prompt.steered`: sessiond's: a steer reached the turn (or became the next one). */
export type PromptSteeredContent = ContentOf<'prompt.steered'>;
/** `terminal.completed`: the attempt answered; the turn completed. */
export type TerminalCompletedContent = ContentOf<'terminal.completed'>;
/** `terminal.cancelled`: sessiond's: the attempt was cancelled and its processes are gone. */
export type TerminalCancelledContent = ContentOf<'terminal.cancelled'>;
/** `workspace.undone`: sessiond's: a turn was taken back. */
export type WorkspaceUndoneContent = ContentOf<'workspace.undone'>;
/** `workspace.not_undone`: sessiond's: a turn a rollback interrupted was not taken back. */
export type WorkspaceNotUndoneContent = ContentOf<'workspace.not_undone'>;

export const MESSAGE_TYPES = CliMessageSchema.options.map((o) => o.shape.type.value) as readonly CliMessageType[];

/** The message that ends an attempt in the log: exactly one per attempt. */
export function isTerminal(message: CliMessage): message is TerminalMessage {
  return (
    message.type === 'terminal.completed' || message.type === 'terminal.failed' || message.type === 'terminal.cancelled'
  );
}

/** An agent's own end of its attempt (completed or failed). */
export function isAgentTerminal(message: CliMessage): message is AgentTerminalMessage {
  return message.type === 'terminal.completed' || message.type === 'terminal.failed';
}

/** A `terminal.failed` that sessiond itself decides (no agent output behind it: no stderr, no invalid lines). */
export function terminalFailed(text: string, category: FailureCategory): MessageOf<'terminal.failed'> {
  return { type: 'terminal.failed', content: { text, category, stderr: '', invalid_output_lines: [] } };
}
