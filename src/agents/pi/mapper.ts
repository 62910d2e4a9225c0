import type { CliMessage, Usage } from '../../protocol/index.ts';
import type { AgentMapper, AttemptExit } from '../shared/agent-mapper.ts';
import { classifyErrorText } from '../shared/classify-error-text.ts';
import { EventLines } from '../shared/invalid-lines.ts';
import { exitFailure, failedMessage, type FailureFacts } from '../shared/terminal.ts';
import { ToolCalls } from '../shared/tool-calls.ts';
import { MessageText } from './message-text.ts';
import { TextDeltas } from './text-deltas.ts';
import { HeldThoughts } from '../shared/held-thoughts.ts';
import { num, obj, str, usageFields } from '../shared/event-fields.ts';

export interface PiMapperOptions {
  /** The pi session id the caller asked to resume: its `session` event then means `session.resumed`. */
  resumeSessionId?: string;
  /** pi saves a session file for this run (not `--no-session`); default true. */
  persistsSession?: boolean;
}

interface AssistantEnd {
  stopReason: string;
  errorMessage?: string;
  usage?: Usage;
}

type PiEvent = Record<string, unknown> & { type: string };

const FAILED_STOPS = new Set(['error', 'aborted']);

/**
 * Maps pi 0.73's events to CliMessages: `--mode json`'s, and `--mode rpc`'s (the same events, plus
 * the `response` lines to sessiond's commands: `get_state`'s gives the session id that json mode
 * prints as its `session` header line, and a refused `prompt` ends the attempt; see rpc.ts).
 * Contract: see AgentMapper. The terminal message is decided at `complete()`,
 * because pi may print `agent_end` more than once when it retries on its own.
 */
export class PiMapper implements AgentMapper {
  readonly #options: PiMapperOptions;
  readonly #lines = new EventLines();
  readonly #tools = new ToolCalls();
  readonly #text = new TextDeltas();
  #current: MessageText | null = null;
  readonly #thoughts = new HeldThoughts();
  #lastAssistant: AssistantEnd | null = null;
  #agentEnded = false;
  #completed = false;
  #userMessageEnded = false;
  #assistantMessageEnded = false;
  #sessionSeen = false;
  /** Why pi refused the prompt command (rpc mode): the turn never started. */
  #promptRefused: string | null = null;

  constructor(options: PiMapperOptions = {}) {
    this.#options = options;
  }

  /** pi printed its final `agent_end` (and no retry of its own followed yet). */
  get agentEnded(): boolean {
    return this.#agentEnded;
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
    if (this.#current !== null) this.#bufferThinking(this.#current);
    this.#current = null;
    this.#thoughts.drainInto(out);
    out.push(...this.#tools.unresolved('the agent ended before reporting this tool result'));
    out.push(this.#terminal(exit));
    return out;
  }

  #onEvent(event: PiEvent): CliMessage[] {
    switch (event.type) {
      case 'session':
        return this.#onSession(str(event.id));
      case 'response':
        return this.#onResponse(event);
      case 'message_start':
        return this.#onMessageStart(event);
      case 'message_update':
        return this.#onMessageUpdate(event);
      case 'message_end':
        return this.#onMessageEnd(event);
      case 'turn_end':
        return this.#onTurnEnd(event);
      case 'tool_execution_start':
      case 'tool_execution_update':
        return this.#onToolProgress(event);
      case 'tool_execution_end':
        return this.#tools.result(str(event.toolCallId), str(event.toolName), event.isError === true, event.result);
      case 'agent_end':
        this.#agentEnded = true;
        return [];
      case 'auto_retry_start':
        this.#agentEnded = false;
        return [retryMessage('start', event)];
      case 'auto_retry_end':
        return [retryMessage('end', event)];
      default:
        return [];
    }
  }

  #onResponse(event: PiEvent): CliMessage[] {
    if (event.command === 'get_state' && event.success === true)
      return this.#onSession(str(obj(event.data)?.sessionId));
    if (event.command === 'prompt' && event.success === false)
      this.#promptRefused = str(event.error) || 'pi refused the prompt';
    return [];
  }

  #onSession(sessionId: string): CliMessage[] {
    // One session per attempt: a later header or state answer repeats it.
    if (sessionId === '' || this.#sessionSeen) return [];
    this.#sessionSeen = true;
    const resume = this.#options.resumeSessionId;
    const resumed = resume !== undefined && resume !== '' && sessionId.startsWith(resume);
    return [{ type: resumed ? 'session.resumed' : 'session.started', content: { sessionId } }];
  }

  #onMessageStart(event: PiEvent): CliMessage[] {
    const message = obj(event.message);
    if (message?.role !== 'assistant') return [];
    if (this.#current !== null) this.#bufferThinking(this.#current);
    this.#current = new MessageText();
    this.#text.startMessage();
    return this.#applySnapshot(message);
  }

  #onMessageUpdate(event: PiEvent): CliMessage[] {
    const update = obj(event.assistantMessageEvent);
    const snapshot = obj(event.message) ?? obj(update?.partial);
    if (this.#current === null) {
      this.#current = new MessageText();
      this.#text.startMessage();
    }
    if (snapshot !== undefined) return this.#applySnapshot(snapshot);
    // No snapshot on this event: fall back to its delta.
    const kind = str(update?.type);
    const index = typeof update?.contentIndex === 'number' ? update.contentIndex : 0;
    if (typeof update?.delta !== 'string') return [];
    if (kind === 'text_delta') this.#current.appendDelta(index, 'text', update.delta);
    else if (kind === 'thinking_delta') this.#current.appendDelta(index, 'thinking', update.delta);
    else return [];
    return this.#textDelta(this.#text.update(this.#current.text()));
  }

  #onMessageEnd(event: PiEvent): CliMessage[] {
    const message = obj(event.message);
    if (message === undefined) return [];
    if (message.role === 'toolResult') {
      return this.#tools.result(str(message.toolCallId), str(message.toolName), message.isError === true, {
        content: message.content,
        details: message.details,
      });
    }
    if (message.role === 'user') this.#userMessageEnded = true;
    if (message.role !== 'assistant') return [];
    this.#assistantMessageEnded = true;
    return this.#endAssistant(message);
  }

  #onTurnEnd(event: PiEvent): CliMessage[] {
    const out: CliMessage[] = [];
    const message = obj(event.message);
    if (message?.role === 'assistant' && this.#current !== null) out.push(...this.#endAssistant(message));
    if (Array.isArray(event.toolResults)) {
      for (const raw of event.toolResults as unknown[]) {
        const result = obj(raw);
        if (result === undefined) continue;
        out.push(
          ...this.#tools.result(str(result.toolCallId), str(result.toolName), result.isError === true, {
            content: result.content,
            details: result.details,
          }),
        );
      }
    }
    if (message !== undefined && str(message.stopReason) !== 'toolUse') this.#thoughts.drainInto(out);
    return out;
  }

  #onToolProgress(event: PiEvent): CliMessage[] {
    const id = str(event.toolCallId);
    if (id === '') return [];
    if (event.type === 'tool_execution_start') return this.#tools.seen(id, str(event.toolName), event.args);
    return this.#tools.progress(id, str(event.toolName), event.args, event.partialResult);
  }

  #endAssistant(message: Record<string, unknown>): CliMessage[] {
    const current = this.#current ?? new MessageText();
    this.#current = null;
    const out = this.#toolCallsOf(message);
    current.setSnapshot(message.content);
    const stopReason = str(message.stopReason) || 'stop';
    out.push(...this.#textDelta(this.#text.endMessage(current.text(), stopReason)));
    this.#bufferThinking(current);
    this.#lastAssistant = {
      stopReason,
      ...(typeof message.errorMessage === 'string' ? { errorMessage: message.errorMessage } : {}),
      ...usageOf(message.usage),
    };
    if (stopReason !== 'toolUse') this.#thoughts.drainInto(out);
    return out;
  }

  #applySnapshot(snapshot: Record<string, unknown>): CliMessage[] {
    const current = this.#current;
    if (current === null) return [];
    const out = this.#toolCallsOf(snapshot);
    current.setSnapshot(snapshot.content);
    out.push(...this.#textDelta(this.#text.update(current.text())));
    return out;
  }

  #toolCallsOf(message: Record<string, unknown>): CliMessage[] {
    if (!Array.isArray(message.content)) return [];
    const out: CliMessage[] = [];
    for (const raw of message.content as unknown[]) {
      const block = obj(raw);
      if (block?.type !== 'toolCall' || typeof block.id !== 'string' || block.id === '') continue;
      out.push(...this.#tools.seen(block.id, str(block.name), block.arguments));
    }
    return out;
  }

  #textDelta(delta: string): CliMessage[] {
    return delta === '' ? [] : [{ type: 'assistant', content: { text: delta } }];
  }

  #bufferThinking(message: MessageText): void {
    const thinking = message.thinking();
    if (thinking !== '') this.#thoughts.push(thinking);
  }

  /**
   * pi writes a new session's file at its first assistant `message_end` (with
   * the user's message), and appends to a resumed session's file message by
   * message: so the prompt is on disk once its user `message_end` was printed
   * and, for a new session, an assistant message ended too.
   */
  #promptRecorded(): boolean {
    if (this.#options.persistsSession === false || !this.#userMessageEnded) return false;
    return this.#options.resumeSessionId !== undefined || this.#assistantMessageEnded;
  }

  #terminal(exit: AttemptExit): CliMessage {
    const terminal = this.#decideTerminal(exit);
    if (terminal.type === 'terminal.failed') terminal.content.promptRecorded = this.#promptRecorded();
    return terminal;
  }

  #decideTerminal(exit: AttemptExit): CliMessage {
    const last = this.#lastAssistant;
    const byExit = exit.stopReason === 'exit_grace' && this.#agentEnded ? null : exitFailure(exit);
    const agentFailed = last !== null && FAILED_STOPS.has(last.stopReason);
    // A process that sessiond could not start, stopped, or timed out: that is what happened.
    if (byExit !== null && (exit.spawnError !== undefined || exit.stopReason !== null))
      return failedMessage(byExit, exit, this.#lines.invalid);
    if (agentFailed && this.#agentEnded) return failedMessage(this.#agentFailure(last), exit, this.#lines.invalid);
    if (this.#promptRefused !== null && last === null)
      return failedMessage(this.#refusal(this.#promptRefused), exit, this.#lines.invalid);
    if (byExit !== null) return failedMessage(byExit, exit, this.#lines.invalid);
    if (this.#lines.validEvents === 0) {
      return failedMessage(
        { text: 'the agent printed no usable events', category: 'invalid_output' },
        exit,
        this.#lines.invalid,
      );
    }
    if (!this.#agentEnded) {
      const facts: FailureFacts = agentFailed
        ? this.#agentFailure(last)
        : { text: 'the agent exited before its closing events (no agent_end)', category: 'process_crash' };
      return failedMessage(facts, exit, this.#lines.invalid);
    }
    if (last === null) {
      return failedMessage(
        { text: 'the agent ended without an assistant message', category: 'invalid_output' },
        exit,
        this.#lines.invalid,
      );
    }
    const invalid = this.#lines.invalid.list();
    return {
      type: 'terminal.completed',
      content: {
        stopReason: last.stopReason,
        ...(last.usage === undefined ? {} : { usage: last.usage }),
        ...(invalid.length === 0 ? {} : { invalid_output_lines: invalid }),
      },
    };
  }

  #refusal(error: string): FailureFacts {
    const classified = classifyErrorText(error);
    return {
      text: `pi refused the prompt: ${error}`,
      category: classified.category,
      agentError: error,
      ...(classified.retryAfterMs === undefined ? {} : { retryAfterMs: classified.retryAfterMs }),
    };
  }

  #agentFailure(last: AssistantEnd): FailureFacts {
    const agentError = last.errorMessage ?? `the model call ended with stop reason "${last.stopReason}"`;
    const classified = classifyErrorText(agentError);
    return {
      text: agentError,
      category: classified.category,
      agentError,
      ...(classified.retryAfterMs === undefined ? {} : { retryAfterMs: classified.retryAfterMs }),
    };
  }
}

function retryMessage(phase: 'start' | 'end', event: PiEvent): CliMessage {
  const errorText =
    typeof event.errorMessage === 'string'
      ? event.errorMessage
      : typeof event.finalError === 'string'
        ? event.finalError
        : undefined;
  const attempt = num(event.attempt);
  const maxAttempts = num(event.maxAttempts);
  const delayMs = num(event.delayMs);
  return {
    type: 'agent.retry',
    content: {
      phase,
      ...(attempt === undefined ? {} : { attempt: Math.trunc(attempt) }),
      ...(maxAttempts === undefined ? {} : { maxAttempts: Math.trunc(maxAttempts) }),
      ...(delayMs === undefined ? {} : { delayMs }),
      ...(typeof event.success === 'boolean' ? { success: event.success } : {}),
      ...(errorText === undefined ? {} : { errorText }),
    },
  };
}

/** pi names its usage fields as the contract does. */
const PI_USAGE = (['input', 'output', 'cacheRead', 'cacheWrite', 'totalTokens'] as const).map(
  (key) => [key, key] as const,
);

function usageOf(raw: unknown): { usage?: Usage } {
  const usage = obj(raw);
  if (usage === undefined) return {};
  const out = usageFields(usage, PI_USAGE);
  const cost = num(obj(usage.cost)?.total);
  if (cost !== undefined) out.cost = cost;
  return { usage: out };
}
