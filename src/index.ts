/**
 * sessiond as a library: chat sessions with CLI coding agents as durable actors on Redis.
 *
 * @example
 * import { createClient, createWorker, defineAgent } from 'sessiond';
 * import { z } from 'zod';
 *
 * const echo = defineAgent({
 *   name: 'echo',
 *   options: z.object({}),
 *   async *run({ prompt }) {
 *     yield { type: 'assistant', content: { text: `you said: ${prompt}` } };
 *     yield { type: 'terminal.completed', content: { stopReason: 'end' } };
 *   },
 * });
 * const worker = createWorker({ redis: 'redis://127.0.0.1:6379', agents: [echo] });
 * await worker.start();
 * const client = createClient({ redis: 'redis://127.0.0.1:6379', agents: [echo] });
 * const { sessionId } = await client.sessions.enqueue({ prompt: 'hello', options: { agent: 'echo' } });
 * for await (const message of client.session(sessionId).watch()) console.log(message.seq, message.type);
 * await client.close();
 * await worker.close();
 */
export {
  createClient,
  type ApprovalsClient,
  type ApprovalVerdict,
  type Client,
  type ClientOptions,
  type DeletionRecord,
  type DeploymentClient,
  type DispatchClient,
  type EnqueueRequest,
  type FleetLimitView,
  type ImportResult,
  type LifecycleOptions,
  type ListPage,
  type PromptsClient,
  type QueuedPrompt,
  type RedisOption,
  type RetryPolicyClient,
  type ScheduleLimits,
  type ScheduleRequest,
  type ScheduleRun,
  type SchedulesClient,
  type ScheduleView,
  type SessionHandle,
  type SessionOwner,
  type SessionsClient,
  type SessionView,
  type ApprovalSummary,
  type NoLiveWorkerNotice,
  type StoredApproval,
  type WorkerHeartbeat,
} from './api/client.ts';
export {
  createReader,
  type DeploymentReader,
  type Reader,
  type ReaderOptions,
  type SessionReader,
  type SessionsReader,
} from './api/reader.ts';
export {
  createWorker,
  type AttemptCeilings,
  type Worker,
  type WorkerEvents,
  type WorkerOptions,
} from './api/worker.ts';
export { defineAgent, type AgentAttempt, type AgentSpec, type DefinedAgent } from './api/define-agent.ts';
export type { Steer, SteeringChannel } from './agents/shared/steering.ts';
export type { WatchOptions } from './api/watch.ts';
export type { MachineState, SessionState, StoredMessage } from './api/types.ts';
export { SESSION_STATES } from './api/states.ts';
export {
  CliMessageSchema,
  FAILURE_CATEGORIES,
  FailureCategorySchema,
  MESSAGE_TYPES,
  isAgentTerminal,
  isTerminal,
  type CliMessage,
  type CliMessageType,
  type FailureCategory,
  type MessageOf,
  type TerminalMessage,
  type AgentTerminalMessage,
  type ContentOf,
  type SessionContent,
  type TextContent,
  type ToolCallContent,
  type ToolUpdateContent,
  type ToolCompletedContent,
  type ToolFailedContent,
  type AgentRetryContent,
  type ApprovalRequestedContent,
  type ApprovalDecidedContent,
  type PromptSteeredContent,
  type ApprovalOption,
  type TerminalCompletedContent,
  type TerminalFailedContent,
  type TerminalCancelledContent,
  type WorkspaceUndoneContent,
  type WorkspaceNotUndoneContent,
  type Usage,
} from './protocol/index.ts';
export { DEFAULT_RETRY_POLICY, RetryPolicySchema, type RetryPolicy, type RetryPolicyResult } from './retry/index.ts';
export type { PolicyInput as DeploymentPolicyInput, DeploymentPolicy, WhenBusy } from './policy/index.ts';
export {
  ArchiveError,
  ConfigError,
  ConflictError,
  ERROR_CODES,
  hasErrorCode,
  InputError,
  NotFoundError,
  PolicyError,
  QuotaError,
  SessionBusyError,
  SessiondError,
  type ErrorCode,
} from './errors.ts';
