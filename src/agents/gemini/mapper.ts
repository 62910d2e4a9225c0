import type { CliMessage, Usage } from '../../protocol/index.ts';
import type { AttemptExit } from '../shared/agent-mapper.ts';
import { EventLines } from '../shared/invalid-lines.ts';
import type { FinishingMapper } from '../shared/run-attempt.ts';
import { exitFailure, failedMessage, type FailureFacts } from '../shared/terminal.ts';
import { ToolCalls } from '../shared/tool-calls.ts';
import { exitCodeFailure, resultFailure } from './failure.ts';
import { meaningfulStderr, retriesInStderr } from './stderr.ts';
import { obj, str, usageFields } from '../shared/event-fields.ts';

export interface GeminiMapperOptions {
  /** The gemini session id the caller asked to resume: its `init` event then means `session.resumed`. */
  resumeSessionId?: string;
}

interface ResultEvent {
  status: string;
  errorMessage?: string;
  usage?: Usage;
}

type GeminiEvent = Record<string, unknown> & { type: string };

/**
 * Maps gemini 0.61's `--output-format stream-json` events to CliMessages:
 * - `init {session_id}` → `session.started` (`session.resumed` for the session asked for);
 * - `message {role:"assistant", content, delta:true}` → `assistant` with exactly that text (in
 *   0.61 every assistant message is such a delta, and the `result` carries no text); gemini
 *   prints no thinking in this format (`thought` parts never reach stdout), so there is no
 *   `assistant.thought`;
 * - `tool_use {tool_id, tool_name, parameters}` → `tool.call`; `tool_result {tool_id, status}`
 *   → `tool.completed`, or `tool.failed` for status `error` (`tool_not_registered` included);
 * - `error {severity, message}` → kept, as the failure text if the result has none;
 * - `result {status}` → the terminal message, decided at `complete()`.
 * Contract: see AgentMapper. Exactly one terminal message, whatever the stream holds; a second
 * `init` or `result` is ignored.
 */
export class GeminiMapper implements FinishingMapper {
  readonly #options: GeminiMapperOptions;
  readonly #lines = new EventLines();
  readonly #tools = new ToolCalls();
  #sessionSeen = false;
  #userMessageSeen = false;
  #modelAnswered = false;
  #toolResults = 0;
  #lastError: string | null = null;
  #result: ResultEvent | null = null;
  #completed = false;

  constructor(options: GeminiMapperOptions = {}) {
    this.#options = options;
  }

  /** gemini printed its `result`: it should exit now. */
  get agentEnded(): boolean {
    return this.#result !== null;
  }

  push(line: string): CliMessage[] {
    if (this.#completed) return [];
    const event = this.#lines.read(line);
    return event === null ? [] : this.#onEvent(event);
  }

  complete(exit: AttemptExit): CliMessage[] {
    if (this.#completed) return [];
    this.#completed = true;
    const out: CliMessage[] = [...retriesInStderr(exit.stderrTail)];
    out.push(...this.#tools.unresolved('the agent ended before reporting this tool result'));
    out.push(this.#terminal({ ...exit, stderrTail: meaningfulStderr(exit.stderrTail) }));
    return out;
  }

  #onEvent(event: GeminiEvent): CliMessage[] {
    if (this.#result !== null) return [];
    switch (event.type) {
      case 'init':
        return this.#onInit(event);
      case 'message':
        return this.#onMessage(event);
      case 'tool_use':
        return this.#onToolUse(event);
      case 'tool_result':
        return this.#onToolResult(event);
      case 'error':
        if (str(event.severity) === 'error' && str(event.message) !== '') this.#lastError = str(event.message);
        return [];
      case 'result':
        this.#result = resultOf(event);
        return [];
      default:
        return [];
    }
  }

  #onInit(event: GeminiEvent): CliMessage[] {
    const sessionId = str(event.session_id);
    if (sessionId === '' || this.#sessionSeen) return [];
    this.#sessionSeen = true;
    const resumed = this.#options.resumeSessionId !== undefined && this.#options.resumeSessionId === sessionId;
    return [{ type: resumed ? 'session.resumed' : 'session.started', content: { sessionId } }];
  }

  #onMessage(event: GeminiEvent): CliMessage[] {
    if (event.role === 'user') {
      this.#userMessageSeen = true;
      return [];
    }
    if (event.role !== 'assistant' || typeof event.content !== 'string') return [];
    this.#modelAnswered = true;
    return event.content === '' ? [] : [{ type: 'assistant', content: { text: event.content } }];
  }

  #onToolUse(event: GeminiEvent): CliMessage[] {
    const id = str(event.tool_id);
    if (id === '') return [];
    this.#modelAnswered = true;
    return this.#tools.seen(id, str(event.tool_name), event.parameters ?? {});
  }

  #onToolResult(event: GeminiEvent): CliMessage[] {
    const id = str(event.tool_id);
    if (id === '') return [];
    this.#toolResults += 1;
    const failed = event.status !== 'success';
    const error = obj(event.error);
    const result = failed
      ? { ...(error ?? {}), ...(event.output === undefined ? {} : { output: event.output }) }
      : event.output;
    // The name is the call's (a result for a call never announced has none).
    return this.#tools.result(id, '', failed, result ?? null);
  }

  /**
   * Whether gemini's chat file holds this attempt's prompt once it failed. Measured: when the
   * first request of a turn fails, gemini rolls the prompt back out of the chat; once a tool
   * result was sent, a later failure keeps the prompt and the tool turn. Killed or stopped
   * before its `result` (INT/TERM exit at once, nothing rolled back), the prompt is on disk
   * once the model answered anything.
   */
  #promptRecorded(): boolean {
    if (!this.#userMessageSeen) return false;
    if (this.#result !== null) return this.#toolResults > 0;
    return this.#modelAnswered;
  }

  #terminal(exit: AttemptExit): CliMessage {
    const terminal = this.#decideTerminal(exit);
    if (terminal.type === 'terminal.failed') terminal.content.promptRecorded = this.#promptRecorded();
    return terminal;
  }

  #decideTerminal(exit: AttemptExit): CliMessage {
    const result = this.#result;
    // Stopped after its result because it did not exit in time: the result is what happened.
    const byExit = exit.stopReason === 'exit_grace' && result !== null ? null : processEnd(exit);
    if (byExit !== null) return failedMessage(byExit, exit, this.#lines.invalid);
    const exitCode = exit.stopReason === 'exit_grace' ? 0 : exit.exitCode;
    if (result === null) {
      if (exitCode !== null && exitCode !== 0)
        return failedMessage(exitCodeFailure(exitCode), exit, this.#lines.invalid);
      if (this.#lines.validEvents === 0)
        return failedMessage(
          { text: 'the agent printed no usable events', category: 'invalid_output' },
          exit,
          this.#lines.invalid,
        );
      return failedMessage(
        { text: 'the agent exited before its result event', category: 'process_crash' },
        exit,
        this.#lines.invalid,
      );
    }
    if (result.status !== 'success') {
      const message =
        result.errorMessage ??
        this.#lastError ??
        `the agent reported status "${result.status}" without an error message`;
      return failedMessage(resultFailure(message, exitCode), exit, this.#lines.invalid);
    }
    if (exitCode !== 0)
      return failedMessage(
        { text: `the agent reported success but exited with code ${String(exitCode)}`, category: 'process_crash' },
        exit,
        this.#lines.invalid,
      );
    const invalid = this.#lines.invalid.list();
    return {
      type: 'terminal.completed',
      content: {
        stopReason: 'stop',
        ...(result.usage === undefined ? {} : { usage: result.usage }),
        ...(invalid.length === 0 ? {} : { invalid_output_lines: invalid }),
      },
    };
  }
}

/** How the process ended, when that alone decides: could not start, stopped, killed. Exit codes are gemini's, read later. */
function processEnd(exit: AttemptExit): FailureFacts | null {
  if (exit.spawnError !== undefined || exit.stopReason !== null || exit.signal !== null) return exitFailure(exit);
  return null;
}

function resultOf(event: GeminiEvent): ResultEvent {
  const error = obj(event.error);
  const message = str(error?.message);
  return {
    status: str(event.status) || 'unknown',
    ...(message === '' ? {} : { errorMessage: message }),
    ...usageOf(event.stats),
  };
}

function usageOf(raw: unknown): { usage?: Usage } {
  const stats = obj(raw);
  if (stats === undefined) return {};
  return {
    usage: usageFields(stats, [
      ['input_tokens', 'input'],
      ['output_tokens', 'output'],
      ['cached', 'cacheRead'],
      ['total_tokens', 'totalTokens'],
    ]),
  };
}
