import type { PromptResponse, SessionUpdate, ToolCallContent, ToolCallUpdate } from '@agentclientprotocol/sdk';
import type { CliMessage } from '../../protocol/index.ts';
import type { AgentMapper, AttemptExit } from '../shared/agent-mapper.ts';
import { obj, str } from '../shared/event-fields.ts';
import { InvalidLines } from '../shared/invalid-lines.ts';
import { exitFailure, failedMessage, type FailureFacts } from '../shared/terminal.ts';
import { ToolCalls } from '../shared/tool-calls.ts';
import { rpcFailure } from './failure.ts';

/**
 * Maps ACP `session/update`s of the attempt's own prompt to CliMessages:
 * - `agent_message_chunk` (text) → `assistant` with exactly that text; `agent_thought_chunk` →
 *   `assistant.thought`; other content kinds (image, audio, resources) are not text and dropped;
 * - `tool_call` → `tool.call` (name: the tool's `name`, else its `title`; arguments: `rawInput`);
 *   `tool_call_update` → `tool.update` when its input or content changes, and exactly one
 *   `tool.completed` / `tool.failed` when its status becomes `completed` / `failed` (result:
 *   `rawOutput`, else the text of its content);
 * - `plan` → `assistant.thought` listing the entries (`[status] content`): the contract has no
 *   plan message, and a plan is the agent's thinking shown to the user;
 * - `notice` (sessiond advertises `session.notices`, so an agent that has them sends its
 *   advisories and error banners as notices rather than as reply text) → `assistant.thought`
 *   `Notice (severity): title — description`: the contract has no notice message either;
 * - `user_message_chunk` (the agent echoing the prompt), commands, modes, usage, session info:
 *   nothing.
 * Contract: pure, never throws.
 */
export class AcpUpdates {
  readonly #tools = new ToolCalls();
  /** The arguments of each tool call as last reported (bounded by the calls of one attempt). */
  readonly #args = new Map<string, unknown>();
  /** The name and kind of each tool call as last reported (the same bound). */
  readonly #names = new Map<string, { name: string; kind?: string }>();

  #remember(call: { toolCallId: string; name?: string | null; title?: string | null; kind?: string | null }): void {
    const known = this.#names.get(call.toolCallId);
    const name =
      typeof call.name === 'string' && call.name !== ''
        ? call.name
        : typeof call.title === 'string' && call.title !== ''
          ? call.title
          : known?.name;
    const kind = typeof call.kind === 'string' ? call.kind : known?.kind;
    this.#names.set(call.toolCallId, { name: name ?? 'tool', ...(kind === undefined ? {} : { kind }) });
  }

  /** A tool call as reported so far (by this request and the updates before it): its name, kind and arguments. */
  describe(toolCall: ToolCallUpdate): { name: string; kind?: string; arguments: unknown } {
    this.#remember(toolCall);
    const known = this.#names.get(toolCall.toolCallId) ?? { name: 'tool' };
    return {
      ...known,
      arguments: toolCall.rawInput ?? this.#args.get(toolCall.toolCallId) ?? describedInput(toolCall),
    };
  }

  update(update: SessionUpdate): CliMessage[] {
    switch (update.sessionUpdate) {
      case 'agent_message_chunk':
        return update.content.type === 'text' && update.content.text !== ''
          ? [{ type: 'assistant', content: { text: update.content.text } }]
          : [];
      case 'agent_thought_chunk':
        return update.content.type === 'text' && update.content.text !== ''
          ? [{ type: 'assistant.thought', content: { text: update.content.text } }]
          : [];
      case 'tool_call': {
        this.#remember(update);
        const name = toolName(update.name, update.title);
        const args = update.rawInput ?? describedInput(update);
        this.#args.set(update.toolCallId, args);
        const out = this.#tools.seen(update.toolCallId, name, args);
        out.push(...this.#status(update.toolCallId, name, update.status, update.rawOutput, update.content));
        return out;
      }
      case 'tool_call_update': {
        this.#remember(update);
        const name = toolName(update.name, update.title);
        const out: CliMessage[] = [];
        const finished = update.status === 'completed' || update.status === 'failed';
        // An update without rawInput keeps the arguments known so far.
        const known = this.#args.has(update.toolCallId);
        const args = update.rawInput ?? this.#args.get(update.toolCallId) ?? describedInput(update);
        this.#args.set(update.toolCallId, args);
        if (!finished && update.content !== undefined && update.content !== null && update.content.length > 0) {
          out.push(...this.#tools.progress(update.toolCallId, name, args, contentText(update.content)));
        } else if (update.rawInput !== undefined || !known) {
          out.push(...this.#tools.seen(update.toolCallId, name, args));
        }
        out.push(...this.#status(update.toolCallId, name, update.status, update.rawOutput, update.content));
        return out;
      }
      case 'notice': {
        const description =
          typeof update.description === 'string' && update.description !== '' ? ` — ${update.description}` : '';
        return [
          {
            type: 'assistant.thought',
            content: { text: `Notice (${update.severity}): ${update.title}${description}` },
          },
        ];
      }
      case 'plan': {
        if (update.entries.length === 0) return [];
        const text = ['Plan:', ...update.entries.map((e) => `[${e.status}] ${e.content}`)].join('\n');
        return [{ type: 'assistant.thought', content: { text } }];
      }
      default:
        return [];
    }
  }

  /**
   * A permission request names the tool call it is for: it is a `tool.call` if the agent did not
   * report it before (gemini 0.61 does not), and a `tool.failed` when sessiond rejected it.
   */
  permission(toolCall: ToolCallUpdate, rejected: string | null): CliMessage[] {
    const name = toolName(toolCall.name, toolCall.title);
    const args = toolCall.rawInput ?? this.#args.get(toolCall.toolCallId) ?? describedInput(toolCall);
    this.#args.set(toolCall.toolCallId, args);
    const out = this.#tools.seen(toolCall.toolCallId, name, args);
    if (rejected !== null) out.push(...this.#tools.result(toolCall.toolCallId, name, true, rejected));
    return out;
  }

  /** Every tool call still open gets a `tool.failed`: the turn ended first. */
  unresolved(reason: string): CliMessage[] {
    return this.#tools.unresolved(reason);
  }

  #status(
    toolCallId: string,
    name: string,
    status: string | null | undefined,
    rawOutput: unknown,
    content: ToolCallContent[] | null | undefined,
  ): CliMessage[] {
    if (status !== 'completed' && status !== 'failed') return [];
    const result = rawOutput ?? (content === undefined || content === null ? '' : contentText(content));
    return this.#tools.result(toolCallId, name, status === 'failed', result);
  }
}

/** A tool call without `rawInput` (gemini 0.61 sends none) is described by its kind and title. */
function describedInput(call: { kind?: string | null; title?: string | null }): Record<string, string> {
  return {
    ...(call.kind === undefined || call.kind === null ? {} : { kind: call.kind }),
    ...(call.title === undefined || call.title === null ? {} : { title: call.title }),
  };
}

function toolName(name: string | null | undefined, title: string | null | undefined): string {
  if (typeof name === 'string' && name !== '') return name;
  if (typeof title === 'string' && title !== '') return title;
  return 'tool';
}

/** The text of a tool's content: its text blocks, diffs as `path`, terminals as their id. */
export function contentText(content: readonly ToolCallContent[]): string {
  const parts: string[] = [];
  for (const item of content) {
    if (item.type === 'content') {
      if (item.content.type === 'text') parts.push(item.content.text);
    } else if (item.type === 'diff') parts.push(`diff ${item.path}`);
    else parts.push(`terminal ${item.terminalId}`);
  }
  return parts.join('\n');
}

/** ACP's stop reason as `terminal.completed` says it; `cancelled` never gets here (see provider.ts). */
export function completedMessage(response: PromptResponse, invalidLines: readonly string[] = []): CliMessage {
  return {
    type: 'terminal.completed',
    content: {
      stopReason: response.stopReason,
      ...(invalidLines.length === 0 ? {} : { invalid_output_lines: [...invalidLines] }),
    },
  };
}

/**
 * A recorded ACP stream (the agent's stdout: JSON-RPC lines) read back, for
 * `sessiond normalize --agent acp:<name>`: `session/update` notifications mapped as above, the
 * `session/request_permission` as the `tool.call` it names, the
 * first `session/new` / `session/load` answer as `session.started` (or `session.resumed` for the
 * session asked for), a result with a `stopReason` as the terminal, an error answer as a failure.
 * Replayed history (`session/load`) cannot be told apart from a recording: it is mapped too.
 */
export class AcpLineMapper implements AgentMapper {
  readonly #updates = new AcpUpdates();
  readonly #lines = new InvalidLines();
  readonly #resume: string | undefined;
  #sessionSeen = false;
  #terminal: CliMessage | null = null;
  #lastError: Record<string, unknown> | undefined;

  constructor(options: { resumeSessionId?: string } = {}) {
    this.#resume = options.resumeSessionId;
  }

  #lineNumber = 0;

  push(line: string): CliMessage[] {
    this.#lineNumber += 1;
    if (line.trim() === '' || this.#terminal !== null) return [];
    let message: Record<string, unknown> | undefined;
    try {
      message = obj(JSON.parse(line) as unknown);
    } catch {
      // Not JSON: handled below as an invalid line (collected and reported, never thrown).
      message = undefined;
    }
    if (message === undefined) {
      this.#lines.add(this.#lineNumber, line, 'not a JSON-RPC message');
      return [];
    }
    const params = obj(message.params);
    if (message.method === 'session/update' && params !== undefined && obj(params.update) !== undefined) {
      return this.#updates.update(params.update as SessionUpdate);
    }
    if (message.method === 'session/request_permission' && params !== undefined && obj(params.toolCall) !== undefined) {
      // The client's answer is not in the agent's output: the request only announces the tool call.
      return this.#updates.permission(params.toolCall as ToolCallUpdate, null);
    }
    const result = obj(message.result);
    if (result !== undefined && !this.#sessionSeen && str(result.sessionId) !== '') {
      this.#sessionSeen = true;
      const sessionId = str(result.sessionId);
      return [{ type: sessionId === this.#resume ? 'session.resumed' : 'session.started', content: { sessionId } }];
    }
    if (result !== undefined && typeof result.stopReason === 'string') {
      this.#terminal =
        result.stopReason === 'cancelled' ? null : completedMessage(result as PromptResponse, this.#lines.list());
      return [];
    }
    const error = obj(message.error);
    if (error !== undefined) this.#lastError = error;
    return [];
  }

  complete(exit: AttemptExit): CliMessage[] {
    const open = this.#updates.unresolved('the turn ended before the tool finished');
    if (this.#terminal !== null) return [...open, this.#terminal];
    const facts: FailureFacts =
      this.#lastError !== undefined
        ? errorFailure(this.#lastError)
        : (exitFailure(exit) ?? {
            text: 'the agent ended without answering session/prompt',
            category: 'process_crash',
          });
    return [...open, failedMessage(facts, exit, this.#lines)];
  }
}

/** A JSON-RPC error object as a failure (see failure.ts for the categories). */
function errorFailure(error: Record<string, unknown>): FailureFacts {
  return rpcFailure(typeof error.code === 'number' ? error.code : undefined, str(error.message), error.data);
}
