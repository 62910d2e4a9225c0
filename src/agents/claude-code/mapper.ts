import type { CliMessage, FailureCategory, Usage } from '../../protocol/index.ts';
import type { AgentMapper, AttemptExit } from '../shared/agent-mapper.ts';
import { categoryForStatus, classifyErrorText } from '../shared/classify-error-text.ts';
import { EventLines } from '../shared/invalid-lines.ts';
import { exitFailure, failedMessage, type FailureFacts } from '../shared/terminal.ts';
import { ToolCalls } from '../shared/tool-calls.ts';
import { ContentBlocks, type BlockOutput } from './content-blocks.ts';
import { HeldThoughts } from '../shared/held-thoughts.ts';
import { num, obj, str, usageFields } from '../shared/event-fields.ts';

export interface ClaudeCodeMapperOptions {
  /** The Claude Code session id the caller asked to resume: its `system/init` then means `session.resumed`. */
  resumeSessionId?: string;
  /** Claude Code saves the session (not `--no-session-persistence`); default true. */
  persistsSession?: boolean;
}

interface ResultFacts {
  subtype: string;
  isError: boolean;
  apiErrorStatus: number | null;
  /** The `result` text, else Claude Code's own error text (a `<synthetic>` message or `errors`). */
  text: string;
  stopReason: string;
  terminalReason: string;
  usage?: Usage;
}

type ClaudeEvent = Record<string, unknown> & { type: string };

/** The model stopped for a reason after which the run goes on (a tool turn): its thinking waits. */
const CONTINUING_STOPS = new Set(['tool_use', 'pause_turn']);
/** Claude Code's `terminal_reason` when it was interrupted (SIGINT) while streaming or running tools. */
const ABORTED = /^aborted/;

/**
 * Maps Claude Code's `-p --output-format stream-json --verbose` events (2.1.x) to CliMessages,
 * with or without `--include-partial-messages`.
 * Contract: see AgentMapper. The terminal message is decided at `complete()` from the `result`
 * event (an API error is `is_error: true`, even with `subtype: "success"`) and the exit.
 * Events of subagents (`parent_tool_use_id` set) stay inside their Task tool call.
 */
export class ClaudeCodeMapper implements AgentMapper {
  readonly #options: ClaudeCodeMapperOptions;
  readonly #lines = new EventLines();
  readonly #tools = new ToolCalls();
  readonly #blocks = new ContentBlocks();
  #sessionId: string | null = null;
  #eventsAfterInit = 0;
  readonly #thoughts = new HeldThoughts();
  /** Claude Code's own error text (a `<synthetic>` assistant message), verbatim. */
  #agentError: string | null = null;
  #result: ResultFacts | null = null;
  #completed = false;

  constructor(options: ClaudeCodeMapperOptions = {}) {
    this.#options = options;
  }

  /** Claude Code printed its `result` event: it should exit now. */
  get agentEnded(): boolean {
    return this.#result !== null;
  }

  push(line: string): CliMessage[] {
    if (this.#completed) return [];
    const event = this.#lines.read(line);
    if (event === null) return [];
    if (this.#sessionId !== null && !isSetupEvent(event)) this.#eventsAfterInit += 1;
    return this.#onEvent(event);
  }

  complete(exit: AttemptExit): CliMessage[] {
    if (this.#completed) return [];
    this.#completed = true;
    const out = this.#release(this.#blocks.finishMessage());
    this.#thoughts.drainInto(out);
    out.push(...this.#tools.unresolved('the agent ended before reporting this tool result'));
    out.push(this.#terminal(exit));
    return out;
  }

  #onEvent(event: ClaudeEvent): CliMessage[] {
    if (typeof event.parent_tool_use_id === 'string' && event.parent_tool_use_id !== '') return [];
    switch (event.type) {
      case 'system':
        return this.#onSystem(event);
      case 'stream_event':
        return this.#onStreamEvent(obj(event.event));
      case 'assistant':
        return this.#onAssistant(event);
      case 'user':
        return this.#onUser(event);
      case 'result':
        return this.#onResult(event);
      default:
        return [];
    }
  }

  #onSystem(event: ClaudeEvent): CliMessage[] {
    if (event.subtype === 'api_retry') return [retryMessage(event)];
    if (event.subtype !== 'init' || this.#sessionId !== null) return [];
    const sessionId = str(event.session_id);
    if (sessionId === '') return [];
    this.#sessionId = sessionId;
    const resume = this.#options.resumeSessionId;
    return [
      {
        type: resume !== undefined && resume === sessionId ? 'session.resumed' : 'session.started',
        content: { sessionId },
      },
    ];
  }

  #onStreamEvent(event: Record<string, unknown> | undefined): CliMessage[] {
    if (event === undefined) return [];
    const index = typeof event.index === 'number' ? event.index : -1;
    switch (event.type) {
      case 'message_start':
        return this.#release(this.#blocks.startMessage(str(obj(event.message)?.id)));
      case 'content_block_start':
        return this.#release(this.#blocks.startBlock(index, obj(event.content_block)));
      case 'content_block_delta': {
        const delta = obj(event.delta);
        if (delta?.type === 'text_delta') return this.#release(this.#blocks.delta(index, 'text', str(delta.text)));
        if (delta?.type === 'thinking_delta')
          return this.#release(this.#blocks.delta(index, 'thinking', str(delta.thinking)));
        if (delta?.type === 'input_json_delta')
          return this.#release(this.#blocks.delta(index, 'tool_use', str(delta.partial_json)));
        return [];
      }
      case 'content_block_stop':
        return this.#release(this.#blocks.stopBlock(index));
      case 'message_delta': {
        const stop = str(obj(event.delta)?.stop_reason);
        if (stop === '' || CONTINUING_STOPS.has(stop)) return [];
        const out = this.#release(this.#blocks.finishMessage());
        this.#thoughts.drainInto(out);
        return out;
      }
      default:
        return [];
    }
  }

  #onAssistant(event: ClaudeEvent): CliMessage[] {
    const message = obj(event.message);
    if (message === undefined) return [];
    // Claude Code's own notice (an API error, mostly), dressed as an assistant message: not model output.
    if (message.model === '<synthetic>') {
      const text = textOf(message.content);
      if (text !== '') this.#agentError = text;
      return [];
    }
    return this.#release(this.#blocks.completed(str(message.id), message.content));
  }

  #onUser(event: ClaudeEvent): CliMessage[] {
    const content = obj(event.message)?.content;
    if (!Array.isArray(content)) return [];
    const out: CliMessage[] = [];
    for (const raw of content as unknown[]) {
      const block = obj(raw);
      if (block?.type !== 'tool_result') continue;
      const id = str(block.tool_use_id);
      if (id === '') continue;
      const result = {
        content: block.content,
        ...(event.tool_use_result === undefined ? {} : { details: event.tool_use_result }),
      };
      out.push(...this.#tools.result(id, '', block.is_error === true, result));
    }
    return out;
  }

  #onResult(event: ClaudeEvent): CliMessage[] {
    const status = event.api_error_status;
    const errors = Array.isArray(event.errors)
      ? (event.errors as unknown[]).filter((e): e is string => typeof e === 'string')
      : [];
    this.#result = {
      subtype: str(event.subtype) || 'unknown',
      isError: event.is_error === true || (typeof event.subtype === 'string' && event.subtype !== 'success'),
      apiErrorStatus: typeof status === 'number' && Number.isInteger(status) ? status : null,
      text: str(event.result) || this.#agentError || errors.join('; '),
      stopReason: str(event.stop_reason),
      terminalReason: str(event.terminal_reason),
      ...usageOf(event),
    };
    const out = this.#release(this.#blocks.finishMessage());
    this.#thoughts.drainInto(out);
    return out;
  }

  #release(outputs: BlockOutput[]): CliMessage[] {
    const out: CliMessage[] = [];
    for (const output of outputs) {
      if (output.type === 'text') out.push({ type: 'assistant', content: { text: output.text } });
      else if (output.type === 'thinking') this.#thoughts.push(output.text);
      else out.push(...this.#tools.seen(output.id, output.name, output.input));
    }
    return out;
  }

  /**
   * Claude Code writes the prompt to its session file before its first model request, and
   * prints nothing between `system/init` and that moment: so the prompt is on disk once any
   * event followed `init` (`system/status` "requesting", a stream event, a retry, a result).
   */
  #promptRecorded(): boolean {
    return this.#options.persistsSession !== false && this.#sessionId !== null && this.#eventsAfterInit > 0;
  }

  #terminal(exit: AttemptExit): CliMessage {
    const terminal = this.#decideTerminal(exit);
    if (terminal.type === 'terminal.failed') terminal.content.promptRecorded = this.#promptRecorded();
    return terminal;
  }

  #decideTerminal(exit: AttemptExit): CliMessage {
    const result = this.#result;
    const byExit = exit.stopReason === 'exit_grace' && result !== null ? null : exitFailure(exit);
    // A process that sessiond could not start, stopped, or timed out: that is what happened.
    if (byExit !== null && (exit.spawnError !== undefined || exit.stopReason !== null))
      return failedMessage(byExit, exit, this.#lines.invalid);
    if (result?.isError === true) return failedMessage(this.#agentFailure(result), exit, this.#lines.invalid);
    if (byExit !== null) {
      // Bad flags, a refused option, an unreadable config: Claude Code says why on stderr and prints no event.
      const atStartup = this.#lines.validEvents === 0 && exit.signal === null;
      return failedMessage(
        atStartup ? { ...byExit, text: `${byExit.text} before printing any event`, category: 'startup' } : byExit,
        exit,
        this.#lines.invalid,
      );
    }
    if (this.#lines.validEvents === 0) {
      return failedMessage(
        { text: 'the agent printed no usable events', category: 'invalid_output' },
        exit,
        this.#lines.invalid,
      );
    }
    if (result === null) {
      return failedMessage(
        { text: 'the agent exited before its closing event (no result)', category: 'process_crash' },
        exit,
        this.#lines.invalid,
      );
    }
    const invalid = this.#lines.invalid.list();
    return {
      type: 'terminal.completed',
      content: {
        stopReason: result.stopReason || result.terminalReason || result.subtype,
        ...(result.usage === undefined ? {} : { usage: result.usage }),
        ...(invalid.length === 0 ? {} : { invalid_output_lines: invalid }),
      },
    };
  }

  /**
   * The category of a failed `result`: the HTTP status Claude Code reports when there is one,
   * `startup` when it failed before starting the session (e.g. `--resume` of a session it
   * does not have), an interrupt from outside sessiond as a crash, a limit of the run's own options
   * (`error_max_turns`, `error_max_budget_usd`, …) as a bad request, else from the error text.
   */
  #agentFailure(result: ResultFacts): FailureFacts {
    const aborted = ABORTED.test(result.terminalReason);
    const agentError = result.text === '' ? undefined : result.text;
    const text = aborted
      ? `the agent was interrupted (${result.terminalReason})`
      : (agentError ??
        `Claude Code ended with ${result.subtype}${result.terminalReason === '' ? '' : ` (${result.terminalReason})`}`);
    const classified = classifyErrorText(text);
    let category: FailureCategory = classified.category;
    if (result.apiErrorStatus !== null && result.apiErrorStatus >= 400)
      category = categoryForStatus(result.apiErrorStatus);
    else if (this.#sessionId === null) category = 'startup';
    else if (aborted) category = 'process_crash';
    else if (result.subtype.startsWith('error_max_')) category = 'bad_request';
    return {
      text,
      category,
      ...(agentError === undefined ? {} : { agentError }),
      ...(classified.retryAfterMs === undefined ? {} : { retryAfterMs: classified.retryAfterMs }),
    };
  }
}

/** `system` events that may come before Claude Code has written the prompt: a repeated init, session-start hooks. */
function isSetupEvent(event: ClaudeEvent): boolean {
  const subtype = str(event.subtype);
  return event.type === 'system' && (subtype === 'init' || subtype.startsWith('hook_'));
}

function retryMessage(event: ClaudeEvent): CliMessage {
  const status = typeof event.error_status === 'number' ? String(event.error_status) : '';
  const errorText = [status, str(event.error)].filter((s) => s !== '').join(' ');
  const attempt = num(event.attempt);
  const maxAttempts = num(event.max_retries);
  const delayMs = num(event.retry_delay_ms);
  return {
    type: 'agent.retry',
    content: {
      phase: 'start',
      ...(attempt === undefined ? {} : { attempt: Math.trunc(attempt) }),
      ...(maxAttempts === undefined ? {} : { maxAttempts: Math.trunc(maxAttempts) }),
      ...(delayMs === undefined ? {} : { delayMs }),
      ...(errorText === '' ? {} : { errorText }),
    },
  };
}

function usageOf(event: ClaudeEvent): { usage?: Usage } {
  const usage = obj(event.usage);
  const cost = event.total_cost_usd;
  if (usage === undefined && typeof cost !== 'number') return {};
  const out = usageFields(usage, [
    ['input_tokens', 'input'],
    ['output_tokens', 'output'],
    ['cache_read_input_tokens', 'cacheRead'],
    ['cache_creation_input_tokens', 'cacheWrite'],
  ]);
  const finiteCost = num(cost);
  if (finiteCost !== undefined) out.cost = finiteCost;
  return { usage: out };
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return (content as unknown[])
    .map((raw) => {
      const block = obj(raw);
      return block?.type === 'text' ? str(block.text) : '';
    })
    .join('');
}
