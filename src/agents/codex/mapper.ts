import type { CliMessage, Usage } from '../../protocol/index.ts';
import type { AgentMapper, AttemptExit } from '../shared/agent-mapper.ts';
import { EventLines } from '../shared/invalid-lines.ts';
import { exitFailure, failedMessage, type FailureFacts } from '../shared/terminal.ts';
import { ToolCalls } from '../shared/tool-calls.ts';
import { classifyCodexError } from './failure.ts';
import { toolItem } from './tool-items.ts';
import { HeldThoughts } from '../shared/held-thoughts.ts';
import { obj, str, usageFields } from '../shared/event-fields.ts';

export interface CodexMapperOptions {
  /** The thread the caller asked to resume: its `thread.started` then means `session.resumed`. */
  resumeSessionId?: string;
  /** Codex keeps a rollout file for this run (not `--ephemeral`); default true. */
  persistsSession?: boolean;
}

type CodexEvent = Record<string, unknown> & { type: string };

/** `{"type":"error","message":"Reconnecting... 2/5 (<why>)"}`: Codex's own retry (only when its retries are on). */
const RECONNECTING = /^Reconnecting\.\.\.\s*(?:(\d+)\s*\/\s*(\d+))?\s*(?:\(([\s\S]*)\))?\s*$/;

/**
 * Maps `codex exec --json` (0.171) events to CliMessages.
 * Contract: see AgentMapper. Codex prints no deltas: an `agent_message` item arrives whole and is
 * one `assistant` message; `reasoning` items are held back and released as `assistant.thought` when
 * the turn ends (after its text, as for pi); `command_execution` (and file_change, mcp_tool_call,
 * web_search) items give one `tool.call` and one `tool.completed` / `tool.failed`. The terminal
 * message is decided at `complete()`, from `turn.completed` / `turn.failed` and the exit.
 * A command the sandbox denied leaves no item at all in Codex's output, so it cannot appear here.
 */
export class CodexMapper implements AgentMapper {
  readonly #options: CodexMapperOptions;
  readonly #lines = new EventLines();
  readonly #tools = new ToolCalls();
  readonly #seenItems = new Set<string>();
  #threadStarted = false;
  #turnStarted = false;
  #turnEnded = false;
  #usage: Usage | undefined;
  #failure: string | null = null;
  #completedTurn = false;
  #lastError: string | null = null;
  #lastWarning: string | null = null;
  #retries = 0;
  readonly #thoughts = new HeldThoughts();
  #completed = false;

  constructor(options: CodexMapperOptions = {}) {
    this.#options = options;
  }

  /** Codex printed `turn.completed` or `turn.failed`: it exits right after. */
  get agentEnded(): boolean {
    return this.#turnEnded;
  }

  push(line: string): CliMessage[] {
    if (this.#completed) return [];
    const event = this.#lines.read(line);
    return event === null ? [] : this.#onEvent(event);
  }

  complete(exit: AttemptExit): CliMessage[] {
    if (this.#completed) return [];
    this.#completed = true;
    const out: CliMessage[] = [];
    this.#thoughts.drainInto(out);
    out.push(...this.#tools.unresolved('the agent ended before reporting this tool result'));
    out.push(this.#terminal(exit));
    return out;
  }

  #onEvent(event: CodexEvent): CliMessage[] {
    switch (event.type) {
      case 'thread.started':
        return this.#onThreadStarted(event);
      case 'turn.started':
        this.#turnStarted = true;
        this.#turnEnded = false;
        return [];
      case 'item.started':
      case 'item.updated':
      case 'item.completed':
        return this.#onItem(event.type, obj(event.item));
      case 'error':
        return this.#onError(str(event.message));
      case 'turn.completed':
        return this.#endTurn(null, usageOf(event.usage));
      case 'turn.failed':
        return this.#endTurn(
          str(obj(event.error)?.message) || this.#lastError || 'the turn failed (Codex gave no reason)',
          undefined,
        );
      default:
        return [];
    }
  }

  #onThreadStarted(event: CodexEvent): CliMessage[] {
    const threadId = str(event.thread_id);
    if (threadId === '' || this.#threadStarted) return [];
    this.#threadStarted = true;
    const resume = this.#options.resumeSessionId;
    const resumed = resume !== undefined && resume !== '' && resume.toLowerCase() === threadId.toLowerCase();
    return [{ type: resumed ? 'session.resumed' : 'session.started', content: { sessionId: threadId } }];
  }

  #onItem(phase: string, item: Record<string, unknown> | undefined): CliMessage[] {
    if (item === undefined) return [];
    const id = str(item.id);
    const type = str(item.type);
    if (id === '') return [];
    const tool = toolItem(type, item);
    if (tool !== null) {
      const out = this.#tools.seen(id, tool.name, tool.arguments);
      if (phase === 'item.updated' && tool.progress !== undefined)
        out.push(...this.#tools.progress(id, tool.name, tool.arguments, tool.progress));
      if (phase === 'item.completed') out.push(...this.#tools.result(id, tool.name, tool.failed, tool.result));
      return out;
    }
    if (phase !== 'item.completed' || this.#seenItems.has(`${type}:${id}`)) return [];
    this.#seenItems.add(`${type}:${id}`);
    const text = str(item.text);
    if (type === 'agent_message') return text === '' ? [] : [{ type: 'assistant', content: { text } }];
    if (type === 'reasoning' && text !== '') this.#thoughts.push(text);
    // A warning (e.g. no metadata for the model): not a failure, kept for the text of one if the run breaks.
    if (type === 'error') this.#lastWarning = str(item.message) || text || this.#lastWarning;
    return [];
  }

  #onError(message: string): CliMessage[] {
    const retry = RECONNECTING.exec(message);
    if (retry === null) {
      if (message !== '') this.#lastError = message;
      return [];
    }
    this.#retries += 1;
    const [, attempt, maxAttempts, why] = retry;
    return [
      {
        type: 'agent.retry',
        content: {
          phase: 'start',
          ...(attempt === undefined ? {} : { attempt: Number(attempt) }),
          ...(maxAttempts === undefined ? {} : { maxAttempts: Number(maxAttempts) }),
          ...(why === undefined || why === '' ? {} : { errorText: why }),
        },
      },
    ];
  }

  #endTurn(failure: string | null, usage: Usage | undefined): CliMessage[] {
    const out: CliMessage[] = [];
    this.#turnEnded = true;
    this.#failure = failure;
    this.#completedTurn = failure === null;
    this.#usage = usage;
    if (this.#retries > 0) {
      out.push({
        type: 'agent.retry',
        content: { phase: 'end', success: failure === null, ...(failure === null ? {} : { errorText: failure }) },
      });
      this.#retries = 0;
    }
    this.#thoughts.drainInto(out);
    return out;
  }

  /** Measured: once `turn.started` was printed, the thread's rollout holds the prompt (after a failure, SIGINT, SIGTERM or SIGKILL alike). */
  #promptRecorded(): boolean {
    return this.#options.persistsSession !== false && this.#threadStarted && this.#turnStarted;
  }

  #terminal(exit: AttemptExit): CliMessage {
    const terminal = this.#decideTerminal(exit);
    if (terminal.type === 'terminal.failed') terminal.content.promptRecorded = this.#promptRecorded();
    return terminal;
  }

  #decideTerminal(exit: AttemptExit): CliMessage {
    const byExit = exit.stopReason === 'exit_grace' && this.#turnEnded ? null : exitFailure(exit);
    // A process that sessiond could not start, stopped, or timed out: that is what happened.
    if (byExit !== null && (exit.spawnError !== undefined || exit.stopReason !== null))
      return failedMessage(byExit, exit, this.#lines.invalid);
    if (this.#failure !== null) return failedMessage(agentFailure(this.#failure), exit, this.#lines.invalid);
    if (byExit !== null) {
      // Exit code 2: Codex rejected its command line. Any other exit before a thread started (a config
      // error, an unknown or busy thread to resume): Codex never began, and the same run fails again.
      const why = errorLine(exit.stderrTail);
      if (exit.exitCode === 2)
        return failedMessage(
          { text: `codex rejected its command line (exit code 2)${why}`, category: 'startup' },
          exit,
          this.#lines.invalid,
        );
      if (!this.#threadStarted && exit.exitCode !== null) {
        return failedMessage(
          { text: `codex exited with code ${exit.exitCode} before it started a thread${why}`, category: 'startup' },
          exit,
          this.#lines.invalid,
        );
      }
      return failedMessage(byExit, exit, this.#lines.invalid);
    }
    if (this.#lines.validEvents === 0) {
      return failedMessage(
        { text: 'the agent printed no usable events', category: 'invalid_output' },
        exit,
        this.#lines.invalid,
      );
    }
    if (!this.#completedTurn) {
      const warning = this.#lastError ?? this.#lastWarning;
      const text = `the agent exited before its closing events (no turn.completed)${warning === null ? '' : `; its last error: ${warning}`}`;
      return failedMessage({ text, category: 'process_crash' }, exit, this.#lines.invalid);
    }
    const invalid = this.#lines.invalid.list();
    return {
      type: 'terminal.completed',
      content: {
        stopReason: 'stop',
        ...(this.#usage === undefined ? {} : { usage: this.#usage }),
        ...(invalid.length === 0 ? {} : { invalid_output_lines: invalid }),
      },
    };
  }
}

/** Codex's own error line on stderr (`error: unexpected argument …`, `Error: thread/resume: …`), which a backtrace may follow. */
function errorLine(stderr: string): string {
  const line = /^(?:error|Error)\b.*$/m.exec(stderr)?.[0]?.trim();
  return line === undefined ? '' : `: ${line.slice(0, 500)}`;
}

function agentFailure(agentError: string): FailureFacts {
  const classified = classifyCodexError(agentError);
  return {
    text: agentError,
    category: classified.category,
    agentError,
    ...(classified.retryAfterMs === undefined ? {} : { retryAfterMs: classified.retryAfterMs }),
  };
}

function usageOf(raw: unknown): Usage | undefined {
  const usage = obj(raw);
  if (usage === undefined) return undefined;
  const out = usageFields(usage, [
    ['input_tokens', 'input'],
    ['output_tokens', 'output'],
    ['cached_input_tokens', 'cacheRead'],
    ['cache_write_input_tokens', 'cacheWrite'],
  ]);
  if (out.input !== undefined && out.output !== undefined) out.totalTokens = out.input + out.output;
  return out;
}
