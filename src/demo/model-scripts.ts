/**
 * The fake model server's scripts (see model-server.ts): the request it records, the steps a
 * script answers with, and the built-in models.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { HangStep, HttpErrorStep as BaseHttpErrorStep, ScriptOf, StreamPacing } from './scripted-http.ts';

// ---------------------------------------------------------------------------------------------
// Request types
// ---------------------------------------------------------------------------------------------

export interface ChatToolCall {
  id?: string;
  type?: string;
  function?: { name?: string; arguments?: string };
  [key: string]: unknown;
}

export interface ChatMessage {
  role: string;
  content?: unknown;
  tool_calls?: ChatToolCall[];
  tool_call_id?: string;
  [key: string]: unknown;
}

export interface ChatCompletionRequestBody {
  model?: string;
  messages?: ChatMessage[];
  tools?: unknown[];
  stream?: boolean;
  [key: string]: unknown;
}

export interface RecordedRequest {
  /** 0-based order over all chat-completion requests this server received. */
  index: number;
  /** 0-based order among the requests for this model id. */
  modelIndex: number;
  model: string;
  body: ChatCompletionRequestBody;
  headers: IncomingHttpHeaders;
  /** Date.now() when the request body was fully received. */
  at: number;
}

// ---------------------------------------------------------------------------------------------
// Script types
// ---------------------------------------------------------------------------------------------

export interface ToolCallSpec {
  /** Default `call_fake_<turn>_<i>`: turn = assistant messages in the request + 1, i = index in this message. */
  id?: string;
  name: string;
  /** An object is JSON-encoded. A string is sent verbatim (may be invalid JSON on purpose). */
  arguments: string | Record<string, unknown>;
  /** Number of fragments the arguments string is split into. Default 3. */
  fragments?: number;
}

export interface UsageSpec {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens?: number;
}

/**
 * A streamed answer. `chunkDelayMs` defaults to 30; 0 = every chunk (and [DONE]) in one socket write.
 * `then: 'done'` (default) sends the finish chunk, the usage chunk and `[DONE]`; `drop` / `hang` stop
 * after `afterChunks` content chunks.
 */
export interface StreamStep extends StreamPacing {
  /** `delta.reasoning_content` chunks, sent first. A string is split at word boundaries. */
  reasoning?: string | string[];
  /** `delta.content` chunks, sent after reasoning. A string is split at word boundaries. */
  text?: string | string[];
  /** Streamed `delta.tool_calls`, sent after text. */
  toolCalls?: ToolCallSpec[];
  /** Default: `tool_calls` when toolCalls is non-empty, else `stop`. */
  finishReason?: string;
  /** Usage chunk (`choices: []`) after the finish chunk. `false` = none. Default 42/7. */
  usage?: UsageSpec | false;
  /** Delay before the response headers are sent. Default 0. */
  headersDelayMs?: number;
  /** For `drop`/`hang`: how many content chunks (reasoning, text, tool fragments) are sent first. Default: all. */
  afterChunks?: number;
}

/** An HTTP error; the default body is `defaultErrorBody(status)` (`{ error: { message: 'fake ...', type, code } }`). */
export interface HttpErrorStep extends BaseHttpErrorStep {
  /** Delay before responding. Default 0. */
  delayMs?: number;
}

export type ScriptStep = StreamStep | HttpErrorStep | HangStep;

export interface ScriptContext {
  request: RecordedRequest;
  body: ChatCompletionRequestBody;
  /** Same as request.modelIndex. */
  index: number;
}

export type ScriptFn = (ctx: ScriptContext) => ScriptStep;
export type Script = ScriptOf<ScriptStep, ScriptContext>;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/** True when the request already contains a tool result (`role: "tool"`) message. */
export function hasToolResult(body: ChatCompletionRequestBody): boolean {
  return (body.messages ?? []).some((m) => m.role === 'tool');
}

const DEFAULT_ERROR_MESSAGES: Record<number, [string, string]> = {
  400: ['fake bad request', 'invalid_request_error'],
  401: ['fake invalid api key', 'authentication_error'],
  403: ['fake forbidden', 'permission_error'],
  404: ['fake model not found', 'not_found_error'],
  429: ['fake rate limit exceeded', 'rate_limit_error'],
  500: ['fake internal server error', 'server_error'],
  502: ['fake bad gateway', 'server_error'],
  503: ['fake service unavailable', 'server_error'],
  529: ['fake overloaded', 'overloaded_error'],
};

/** The default JSON error body for a status (the SDK turns it into `"<status> <message>"`). */
export function defaultErrorBody(status: number): { error: { message: string; type: string; code: string | null } } {
  const [message, type] = DEFAULT_ERROR_MESSAGES[status] ?? [`fake http ${status}`, 'server_error'];
  return { error: { message, type, code: null } };
}

// ---------------------------------------------------------------------------------------------
// Built-in models
// ---------------------------------------------------------------------------------------------

export const DEFAULT_TEXT = 'Hello from the fake LLM.';

const afterTool =
  (first: ScriptStep, then: ScriptStep): ScriptFn =>
  ({ body }) =>
    hasToolResult(body) ? then : first;

/** Built-in scripts, keyed by model id. Returned fresh for each server. */
export function builtinScripts(): Record<string, Script> {
  const bash = (command: string): ToolCallSpec => ({ name: 'bash', arguments: { command } });
  return {
    text: { text: DEFAULT_TEXT },
    'text-burst': { text: DEFAULT_TEXT, chunkDelayMs: 0 },
    thinking: { reasoning: ['Let me', ' think', ' about it.'], text: ['Hello', ' there.'] },
    tool: afterTool({ toolCalls: [bash('echo hi')] }, { text: 'The command printed: hi' }),
    'tool-fail': afterTool(
      { toolCalls: [bash('echo failing >&2; ls /nonexistent-fake-dir; exit 3')] },
      { text: 'The command failed.' },
    ),
    'two-tools': afterTool({ toolCalls: [bash('echo one'), bash('echo two')] }, { text: 'Both commands ran.' }),
    /** Text, then a tool call in the SAME assistant message; after the tool result, more text. */
    'text-tool-text': afterTool(
      { text: 'Let me run a command.', toolCalls: [bash('echo hi')] },
      { text: 'The command printed hi. Done.' },
    ),
    /** bash `sleep 1000` (bash execs sleep directly: it is pi's direct child). */
    'long-tool': afterTool({ toolCalls: [bash('sleep 1000')] }, { text: 'Slept.' }),
    /** bash that starts two background sleeps (grandchildren of pi) and waits. */
    'long-tool-grandchild': afterTool({ toolCalls: [bash('sleep 1001 & sleep 1002 & wait')] }, { text: 'Slept.' }),
    /** bash that starts a grandchild in a NEW session (escapes pi's process-group kill). */
    'long-tool-setsid': afterTool({ toolCalls: [bash('setsid sleep 1003 & sleep 1004')] }, { text: 'Slept.' }),
    http400: { status: 400 },
    http401: { status: 401 },
    http403: { status: 403 },
    http429: { status: 429, headers: { 'retry-after': '7' } },
    http500: { status: 500 },
    http502: { status: 502 },
    http503: { status: 503, headers: { 'retry-after': '3' } },
    midclose: { text: ['Partial', ' answer', ' never', ' finished'], then: 'drop', afterChunks: 2 },
    hang: { hang: true },
    'hang-midstream': { text: ['Partial', ' answer'], then: 'hang', afterChunks: 1 },
    'flaky-500-then-text': [{ status: 500 }, { text: DEFAULT_TEXT }],
    'flaky-midclose-then-text': [
      { text: ['Partial', ' answer', ' never'], then: 'drop', afterChunks: 2 },
      { text: DEFAULT_TEXT },
    ],
  };
}

export const BUILTIN_MODEL_IDS: readonly string[] = Object.freeze(Object.keys(builtinScripts()));
